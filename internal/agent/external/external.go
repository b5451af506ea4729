package external

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
)

// Agent runs one shell command (a profile's or --agent-cmd's) per attempt.
type Agent struct {
	spec    run.AgentSpec
	profile *Profile // nil for --agent-cmd
}

// New returns the agent for spec (a profile or a plain command).
func New(spec run.AgentSpec) (*Agent, error) {
	if spec.Name == CommandName {
		if spec.Command == "" {
			return nil, errors.New("external agent: empty command")
		}
		return &Agent{spec: spec}, nil
	}
	p, ok := Lookup(spec.Name)
	if !ok {
		return nil, fmt.Errorf("external agent: no profile %q", spec.Name)
	}
	if spec.Binary == "" {
		return nil, fmt.Errorf("external agent %s: the CLI's path was not recorded at submit", spec.Name)
	}
	return &Agent{spec: spec, profile: &p}, nil
}

var _ agent.Agent = (*Agent)(nil)

// Launch is what attempt in starts: the command, its extra environment
// and the HOME files a profile writes.
func (a *Agent) Launch(in agent.AttemptInput) (Launch, error) {
	if a.profile == nil {
		env := commandGatewayEnv(in.Gateway)
		if in.Gateway != nil && a.spec.Model != "" {
			env = append(env, "AGENTRUN_MODEL="+a.spec.Model)
		}
		return Launch{Command: a.spec.Command, Env: env}, nil
	}
	p := a.profile
	if in.Gateway == nil || !slices.Contains(in.Gateway.Routes, p.Protocol) {
		return Launch{}, fmt.Errorf("%s: the run's model gateway has no %s route", p.Name, p.Protocol)
	}
	l := p.launch(a.spec, LaunchInput{
		BaseURL: strings.TrimRight(in.Gateway.URL, "/") + "/" + p.Protocol, Key: in.Gateway.Key,
		Model: cmp.Or(a.spec.Model, p.DefaultModel), Home: in.Home, WorkDir: in.WorkDir,
		Session: a.spec.Session, Resume: in.ContinueSession && p.Sessions,
	})
	l.Command = helpersOnPath(a.spec.Helpers) + l.Command
	return l, nil
}

// helpersOnPath is the shell prefix that puts the directories of helpers
// (run.AgentSpec.Helpers: programs the CLI runs from PATH, shown at the
// same paths) first on PATH, in order; "" for none. Only the helper
// itself is shown of its directory, so nothing else on PATH is hidden.
func helpersOnPath(helpers []string) string {
	var dirs []string
	for _, h := range helpers {
		if d := path.Dir(filepath.ToSlash(h)); path.IsAbs(d) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return ""
	}
	return "PATH=" + shellQuote(strings.Join(dirs, ":")) + `${PATH:+:$PATH}; export PATH; `
}

// commandGatewayEnv points an --agent-cmd agent at the gateway's routes
// with the variables the usual SDKs read.
func commandGatewayEnv(g *agent.Gateway) []string {
	if g == nil {
		return nil
	}
	base := strings.TrimRight(g.URL, "/")
	env := []string{"AGENTRUN_GATEWAY_URL=" + base, "AGENTRUN_GATEWAY_KEY=" + g.Key}
	for _, r := range g.Routes {
		switch r {
		case "anthropic":
			env = append(env, "ANTHROPIC_BASE_URL="+base+"/anthropic", "ANTHROPIC_API_KEY="+g.Key)
		case "openai":
			env = append(env, "OPENAI_BASE_URL="+base+"/openai/v1", "OPENAI_API_KEY="+g.Key)
		case "gemini":
			env = append(env, "GOOGLE_GEMINI_BASE_URL="+base+"/gemini", "GEMINI_API_KEY="+g.Key)
		}
	}
	return env
}

// writeFiles writes a profile's files under the host HOME without
// following links: the sandbox's HOME is the agent's to change, so a link
// it left there must not make the host write elsewhere (os.Root refuses
// any path that leaves the directory).
func writeFiles(hostHome string, files map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(hostHome)
	if err != nil {
		return fmt.Errorf("profile files: %w", err)
	}
	defer root.Close()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		clean := path.Clean(n)
		if clean != n || path.IsAbs(n) || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." {
			return fmt.Errorf("profile file %q: not a plain relative path", n)
		}
		if d := path.Dir(clean); d != "." {
			if err := root.MkdirAll(d, 0o700); err != nil {
				return fmt.Errorf("profile file %s: %w", n, err)
			}
		}
		// A link (or anything but a regular file) in the way is removed,
		// never followed.
		if fi, err := root.Lstat(clean); err == nil && !fi.Mode().IsRegular() {
			if err := root.RemoveAll(clean); err != nil {
				return fmt.Errorf("profile file %s: %w", n, err)
			}
		}
		if err := root.WriteFile(clean, []byte(files[n]), 0o600); err != nil {
			return fmt.Errorf("profile file %s: %w", n, err)
		}
	}
	return nil
}

// Attempt runs the command with the prompt on stdin and in.Env plus the
// launch's variables added to the sandbox's environment. Its output
// (stdout and stderr) goes to in.Output. ctx cancellation kills the
// command's process group; the outcome then says cancelled or timeout
// (context.DeadlineExceeded).
func (a *Agent) Attempt(ctx context.Context, in agent.AttemptInput) (*agent.Outcome, error) {
	l, err := a.Launch(in)
	if err != nil {
		return nil, err
	}
	if in.HostHome != "" {
		recoverHome(in.HostHome)
		a.warmHome(ctx, in)
		if err := writeFiles(in.HostHome, l.Files); err != nil {
			return nil, err
		}
	}
	env := append(slices.Clone(in.Env), l.Env...)
	res, err := in.Runner.Exec(ctx, runner.ExecRequest{
		Shell: l.Command,
		Cwd:   cmp.Or(in.StartDir, in.WorkDir),
		Env:   env,
		Stdin: []byte(in.Prompt),
	}, in.Output, in.Output)
	out, oerr := outcome(ctx, res, err)
	if out != nil && a.profile != nil && a.profile.Sessions {
		out.Session, out.SessionContinued = a.spec.Session, in.ContinueSession
	}
	return out, oerr
}

func outcome(ctx context.Context, res *runner.ExecResult, err error) (*agent.Outcome, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		out := &agent.Outcome{Reason: run.ReasonCancelled, Message: "the agent was stopped"}
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, context.DeadlineExceeded) || errors.Is(ctxErr, context.DeadlineExceeded):
			out.Reason, out.Message = run.ReasonTimeout, "the run's time limit was reached"
		case cause != nil && cause != ctxErr:
			// Why the attempt was ended (the budget, the model server).
			out.Message += ": " + cause.Error()
		}
		if res != nil {
			code := res.ExitCode
			out.ExitCode = &code
		}
		return out, nil
	}
	if runner.IsCode(err, runner.CodeExec) {
		return &agent.Outcome{Reason: run.ReasonAgentFailed, Message: fmt.Sprintf("the agent could not be started: %v", err)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run agent: %w", err)
	}
	code := res.ExitCode
	out := &agent.Outcome{ExitCode: &code, Reason: run.ReasonCompleted}
	switch {
	case res.TimedOut:
		out.Reason, out.Message = run.ReasonTimeout, "the agent timed out"
	case res.Cancelled:
		out.Reason, out.Message = run.ReasonCancelled, "the agent was stopped"
	case code != 0:
		out.Reason = run.ReasonAgentFailed
		out.Message = fmt.Sprintf("the agent exited with code %d", code)
		if res.Signal != "" {
			out.Message = "the agent was killed by " + res.Signal
		}
	}
	return out, nil
}
