package external

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
)

// Agent runs one shell command (a profile's or --agent-cmd's) per attempt.
type Agent struct {
	Command string
}

// New returns the agent for spec (a profile or a plain command).
func New(spec run.AgentSpec) (*Agent, error) {
	if spec.Command == "" {
		return nil, errors.New("external agent: empty command")
	}
	return &Agent{Command: spec.Command}, nil
}

var _ agent.Agent = (*Agent)(nil)

// Attempt runs the command with the prompt on stdin and in.Env added to
// the sandbox's environment. Its output (stdout and stderr) goes to
// in.Output. ctx cancellation kills the command's process group; the
// outcome then says cancelled or timeout (context.DeadlineExceeded).
func (a *Agent) Attempt(ctx context.Context, in agent.AttemptInput) (*agent.Outcome, error) {
	res, err := in.Runner.Exec(ctx, runner.ExecRequest{
		Shell: a.Command,
		Cwd:   in.WorkDir,
		Env:   in.Env,
		Stdin: []byte(in.Prompt),
	}, in.Output, in.Output)
	if ctxErr := ctx.Err(); ctxErr != nil {
		out := &agent.Outcome{Reason: run.ReasonCancelled, Message: "the agent was stopped"}
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) || errors.Is(ctxErr, context.DeadlineExceeded) {
			out.Reason, out.Message = run.ReasonTimeout, "the run's time limit was reached"
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
