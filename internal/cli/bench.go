package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/bench/fixtures"
	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/bench"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/workspace"
)

// fixtureOptions say where the fixtures are: --fixtures DIR, the
// built-in set, or the repository's bench/ directory.
type fixtureOptions struct {
	Dirs    []string
	Builtin bool
	Tasks   []string
	Repo    string
}

type benchOptions struct {
	fixtureOptions
	Agents      []string
	AgentCmd    string
	Models      []string
	ModelServer string
	Sandbox     string
	Repeat      int
	Parallel    int
	Out         string
	Timeout     string
	Attempts    int
	MaxTurns    int
	MaxTokens   int64
	MaxCost     float64

	set func(name string) bool
}

// Validate checks the flags alone.
func (o *benchOptions) Validate() error {
	switch {
	case len(o.Agents) == 0 && o.AgentCmd == "":
		return catalog.NoAgent.New("give --agent NAME (repeatable) or --agent-cmd CMD")
	case o.Repeat < 1:
		return catalog.Usage.New("--repeat must be at least 1")
	case o.Parallel < 1:
		return catalog.Usage.New("--parallel must be at least 1")
	case o.set("attempts") && o.Attempts < 1:
		return catalog.BadAttempts.New("--attempts %d", o.Attempts)
	case o.set("max-turns") && o.MaxTurns < 1:
		return catalog.Usage.New("--max-turns must be at least 1")
	}
	if o.Timeout != "" {
		if d, err := time.ParseDuration(o.Timeout); err != nil || d < 0 {
			return catalog.BadDuration.New("--timeout %q", o.Timeout)
		}
	}
	return o.fixtureOptions.Validate()
}

// Validate checks the fixture flags.
func (o *fixtureOptions) Validate() error {
	if o.Builtin && len(o.Dirs) > 0 {
		return catalog.ConflictFlags.New("--fixtures and --builtin-fixtures")
	}
	return nil
}

func (o *fixtureOptions) flags(c *cobra.Command) {
	f := c.Flags()
	f.StringArrayVar(&o.Dirs, "fixtures", nil, "read fixtures from DIR: a fixture, or a directory of them (repeatable; default: the repository's bench/, else the built-in set)")
	f.BoolVar(&o.Builtin, "builtin-fixtures", false, "use agentrun's own fixtures")
	f.StringArrayVar(&o.Tasks, "task", nil, "only the fixture called NAME (repeatable)")
	f.StringVar(&o.Repo, "repo", ".", "repository whose bench/ holds the fixtures")
}

func (app *App) newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	c := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Run fixture tasks with agents and models, and say which pass, at what cost",
		Long:  benchHelp + "\n" + benchExitStatus,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.set = func(n string) bool { return cmd.Flags().Changed(n) }
			if err := o.Validate(); err != nil {
				return err
			}
			return app.runBench(cmd.Context(), o)
		},
	}
	o.fixtureOptions.flags(c)
	f := c.Flags()
	f.StringArrayVar(&o.Agents, "agent", nil, "agent profile or builtin (repeatable): "+strings.Join(append(app.Deps.Agents.Names(), agent.BuiltinName), ", "))
	f.StringVar(&o.AgentCmd, "agent-cmd", "", "also run this command as an agent (sh -c in the sandbox; task on stdin)")
	f.StringArrayVar(&o.Models, "model", nil, "model to ask for (repeatable: every agent runs with each; default: the profile's)")
	f.StringVar(&o.ModelServer, "model-server", "", "send model traffic to this server: a URL or a [model_servers] name")
	f.StringVar(&o.Sandbox, "sandbox", "", "sandbox backend of the runs and of their acceptance")
	f.IntVar(&o.Repeat, "repeat", 1, "runs of each agent/model on each fixture (for pass@k)")
	f.IntVar(&o.Parallel, "parallel", 1, "runs at once (at most max_parallel)")
	f.StringVar(&o.Out, "out", "", "write the results (JSON lines) here (default: the bench's directory under the data directory)")
	f.StringVar(&o.Timeout, "timeout", "", "time limit of each run (default: the fixture's, else the configured)")
	f.IntVar(&o.Attempts, "attempts", 0, "agent attempts of each run (default: the fixture's, else 1)")
	f.IntVar(&o.MaxTurns, "max-turns", 0, "turn limit per attempt (builtin agent)")
	f.Int64Var(&o.MaxTokens, "max-tokens", 0, "end a run when its model use reaches this many tokens (0 = no limit)")
	f.Float64Var(&o.MaxCost, "max-cost", 0, "end a run when its estimated cost reaches this many US dollars (0 = no limit)")
	for _, sub := range []*cobra.Command{app.newBenchSummarizeCmd(), app.newBenchCompareCmd(), app.newBenchListCmd(), app.newBenchCheckCmd()} {
		sub.Long += "\n" + benchExitStatus
		c.AddCommand(sub)
	}
	return c
}

const benchHelp = `Run every agent/model on every fixture task (--repeat times each), through
the normal submit path (the same planning, supervisor and sandbox backend as
'agentrun submit'), and judge each result with the fixture's acceptance:

  passed  the acceptance passed on the result
  failed  the agent produced nothing, or a result the acceptance refuses
  gamed   the result changed accept.sh or a file the fixture protects
  error   the run or its judging could not be carried out (says nothing of
          the agent; left out of the pass rates)

The acceptance runs on the result's tree, checked out from the repository into
a new temporary directory, in a fresh sandbox of the run's backend with no
network. Each run is one JSON line of the results file (after a header with the
bench's settings): its status, attempts, turns, tokens, cost, wall time, the
sandbox's overhead and the harness's failures (nudges, stalls, max_turns). At
the end the per-model and per-task tables are printed (under --json: the
summary, as 'bench summarize --json' prints it).

A fixture is a directory:
  task.md       the task text
  accept.sh     the acceptance (sh ./accept.sh in the tree's root), or
                accept = "COMMAND" in fixture.toml
  repo/         the files of the repository the run starts from (repo.txtar:
                the same as a txtar archive; repo = "PATH" in fixture.toml:
                an existing repository, base = "REF")
  fixture.toml  optional: language, protected = ["PATH"], [expect]
                "PATH" = "sha256:HEX" | "absent", timeout, accept_timeout,
                attempts, [checks] NAME = "COMMAND"
  solution/     optional: files that pass (for 'agentrun bench check')
Fixtures come from --fixtures DIR, else the repository's bench/ directory,
else agentrun's own set (--builtin-fixtures; 'agentrun bench list').

Examples:
  agentrun bench --agent builtin --model qwen3-coder --model-server lmstudio --repeat 3
  agentrun bench summarize results.jsonl --html bench.html
  agentrun bench compare before.jsonl after.jsonl`

// benchExitStatus is the bench commands' exit status.
const benchExitStatus = `
EXIT STATUS
  0    done (whatever the pass rate)
  1    bench: a run ended in error (it could not be measured);
       bench check: a fixture's check found a problem
  2    usage, fixture, preflight or environment error; no run was started
  70   internal error
  130  interrupted (Ctrl-C): bench cancels its runs; the results file
       holds the runs that finished`

// agents are the bench's agent/model entries: each agent with each model.
func (o *benchOptions) agents() []bench.Agent {
	models := o.Models
	if len(models) == 0 {
		models = []string{""}
	}
	var out []bench.Agent
	for _, name := range o.Agents {
		for _, m := range models {
			out = append(out, bench.Agent{Agent: name, Model: m, ModelServer: o.ModelServer})
		}
	}
	if o.AgentCmd != "" {
		a := bench.Agent{Agent: agent.CommandName, Command: o.AgentCmd}
		if o.ModelServer != "" {
			a.ModelServer = o.ModelServer
		}
		out = append(out, a)
	}
	return out
}

func (app *App) runBench(ctx context.Context, o *benchOptions) error {
	s, err := config.Load(app.Getenv)
	if err != nil {
		return err
	}
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	fs, err := app.benchFixtures(ctx, &o.fixtureOptions)
	if err != nil {
		return err
	}
	id := time.Now().UTC().Format("20060102-150405") + "-" + run.NewID()[:4]
	dir := filepath.Join(env.Home, "bench", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return catalog.Home.Wrap(err, "%v", err)
	}
	out := o.Out
	if out == "" {
		out = filepath.Join(dir, "results.jsonl")
	}
	parallel := o.Parallel
	if parallel > s.MaxParallel {
		app.warn("--parallel %d is more than max_parallel (%d): %d runs at once", parallel, s.MaxParallel, s.MaxParallel)
		parallel = s.MaxParallel
	}
	host, _ := os.Hostname()
	h := bench.Header{Bench: id, StartedAt: time.Now().UTC(), AgentrunVersion: buildVersion().String(), Host: host,
		Sandbox: o.Sandbox, Repeat: o.Repeat, Parallel: parallel, Timeout: o.Timeout, Attempts: o.Attempts, Agents: o.agents()}
	if h.Sandbox == "" {
		h.Sandbox = firstNonEmpty(s.Sandbox, app.Deps.DefaultBackend)
	}
	for _, f := range fs {
		h.Fixtures = append(h.Fixtures, bench.FixtureInfo{Name: f.Name, Language: f.Language, Source: f.Source, Digest: f.Digest})
	}
	// The bench's runs keep to the policy in force as submit's do.
	svc := app.Deps.submitService()
	if svc.Policy, err = app.policyInForce(s); err != nil {
		return err
	}
	w, err := bench.Create(out, h)
	if err != nil {
		return catalog.Home.Wrap(err, "results: %v", err)
	}
	sub := &benchSubmitter{app: app, env: env, settings: s, o: o, svc: svc, warned: map[string]bool{}}
	b := &bench.Bench{
		Submitter: sub, Store: env.Store, Layout: env.Layout, Dir: dir,
		Scorer: &bench.Scorer{Backends: app.Deps.backends(app.Executable), Workspaces: app.Deps.Workspaces,
			LogDir: filepath.Join(dir, "accept"), Path: app.Getenv("PATH")},
		Agents: h.Agents, Fixtures: fs, Repeat: o.Repeat, Parallel: parallel, Out: w,
		Progress: app.benchProgress,
	}
	fmt.Fprintf(app.Stderr, "bench %s: %d fixtures × %d agents × %d; results in %s\n", id, len(fs), len(h.Agents), o.Repeat, out)
	results, err := b.Run(ctx)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(app.Stderr, "bench stopped; the runs that finished are in %s\n", out)
		}
		return err
	}
	sum := bench.Summarize(h, results, 0)
	sum.File = out
	if err := app.printSummary(sum); err != nil {
		return err
	}
	for _, r := range results {
		if r.Status == bench.StatusError {
			return &reported{exit: catalog.ExitRunFailed}
		}
	}
	return nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// benchFixtures reads the fixtures the options name.
func (app *App) benchFixtures(ctx context.Context, o *fixtureOptions) ([]*bench.Fixture, error) {
	var all []*bench.Fixture
	switch {
	case len(o.Dirs) > 0:
		for _, d := range o.Dirs {
			abs, err := filepath.Abs(d)
			if err != nil {
				return nil, catalog.BadFixture.Wrap(err, "%s: %v", d, err)
			}
			if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
				return nil, catalog.BadFixture.New("%s is not a directory", d)
			}
			fs, err := bench.Discover(os.DirFS(abs), ".", abs, abs)
			if err != nil {
				return nil, err
			}
			all = append(all, fs...)
		}
	case o.Builtin:
		return app.builtinFixtures(o.Tasks)
	default:
		dir := ""
		if r, err := workspace.OpenRepo(ctx, o.Repo); err == nil {
			dir = filepath.Join(r.Path(), "bench")
		}
		if fi, err := os.Stat(dir); dir == "" || err != nil || !fi.IsDir() {
			return app.builtinFixtures(o.Tasks)
		}
		fs, err := bench.Discover(os.DirFS(dir), ".", dir, dir)
		if err != nil {
			return nil, err
		}
		if err := confineRepos(fs, filepath.Dir(dir)); err != nil {
			return nil, err
		}
		all = fs
	}
	seen := map[string]string{}
	for _, f := range all {
		if other, ok := seen[f.Name]; ok {
			return nil, catalog.BadFixture.New("two fixtures are named %s: in %s and %s", f.Name, other, f.Source)
		}
		seen[f.Name] = f.Source
	}
	return bench.Select(all, o.Tasks)
}

// confineRepos refuses a fixture read from a repository's bench/ that
// names a repository outside it: what a repository holds never points
// agentrun at other host paths (--fixtures DIR, the user's own choice,
// may).
func confineRepos(fs []*bench.Fixture, top string) error {
	root, err := filepath.EvalSymlinks(top)
	if err != nil {
		return catalog.BadFixture.Wrap(err, "%v", err)
	}
	for _, f := range fs {
		if f.Repo == "" {
			continue
		}
		p, err := filepath.EvalSymlinks(f.Repo)
		if err != nil {
			return catalog.BadFixture.Wrap(err, "fixture %s: repo %s: %v", f.Name, f.Repo, err)
		}
		if rel, err := filepath.Rel(root, p); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return catalog.BadFixture.New("fixture %s (%s): repo %s is outside the repository; a repository's bench/ may name only that repository", f.Name, f.Source, f.Repo).
				WithFix("keep the fixture with --fixtures DIR if you mean that repository")
		}
	}
	return nil
}

func (app *App) builtinFixtures(tasks []string) ([]*bench.Fixture, error) {
	fs, err := bench.Discover(fixtures.FS, ".", "", "builtin")
	if err != nil {
		return nil, err
	}
	return bench.Select(fs, tasks)
}

// benchProgress says on stderr how each run came out.
func (app *App) benchProgress(done, total int, r bench.Result) {
	line := fmt.Sprintf("[%d/%d] %s %s #%d: %s", done, total, r.Fixture, r.Label(), r.Repeat, r.Status)
	var facts []string
	if r.Turns > 0 {
		facts = append(facts, plural(r.Turns, "turn"))
	}
	if r.Tokens.Total > 0 {
		facts = append(facts, compactCount(float64(r.Tokens.Total))+" tokens")
	}
	if r.WallMS > 0 {
		facts = append(facts, humanDuration(time.Duration(r.WallMS)*time.Millisecond))
	}
	if len(facts) > 0 {
		line += " (" + strings.Join(facts, ", ") + ")"
	}
	if r.Status != bench.StatusPassed && r.Message != "" {
		line += ": " + oneLine(r.Message, 160)
	}
	fmt.Fprintln(app.Stderr, line)
}

// benchSubmitter runs the bench's jobs as submit does.
type benchSubmitter struct {
	app      *App
	env      *Env
	settings config.Settings
	o        *benchOptions
	svc      *submit.Service

	mu     sync.Mutex
	warned map[string]bool
}

// request is the submit request of job j: the bench's flags over the
// fixture's settings over the configuration.
func (s *benchSubmitter) request(j bench.Job) submit.Request {
	f := j.Fixture
	so := &submitOptions{
		Repo: j.Repo, Base: j.Base, Agent: j.Agent.Agent, Model: j.Agent.Model, ModelServer: j.Agent.ModelServer,
		Sandbox: s.o.Sandbox, Timeout: s.o.Timeout, Attempts: s.o.Attempts, MaxTurns: s.o.MaxTurns,
		MaxTokens: s.o.MaxTokens, MaxCost: s.o.MaxCost,
	}
	if j.Agent.Command != "" {
		so.Agent, so.AgentCmd = "", j.Agent.Command
	}
	if so.Timeout == "" && f.Timeout > 0 {
		so.Timeout = f.Timeout.String()
	}
	attemptsSet := s.o.set("attempts")
	if !attemptsSet {
		so.Attempts, attemptsSet = max(f.Attempts, 1), true
	}
	for _, c := range f.Checks {
		so.Checks = append(so.Checks, c.Name+"="+c.Command)
	}
	so.set = func(name string) bool {
		if name == "attempts" {
			return attemptsSet
		}
		return s.o.set(name)
	}
	req := so.request(s.settings, s.app.Getenv)
	req.Task = f.Task
	return req
}

// Plan implements bench.Submitter.
func (s *benchSubmitter) Plan(ctx context.Context, j bench.Job) error {
	_, warnings, err := s.svc.Plan(ctx, s.request(j))
	if err == nil {
		s.warn(warnings)
	}
	return err
}

// Run implements bench.Submitter: plan, start the supervisor, wait for the
// end. When ctx ends first, the run is cancelled.
func (s *benchSubmitter) Run(ctx context.Context, j bench.Job) (*run.Run, error) {
	r, warnings, err := s.svc.Plan(ctx, s.request(j))
	if err != nil {
		return nil, err
	}
	s.warn(warnings)
	maxParallel := s.settings.MaxParallel
	if err := supervisor.Start(ctx, s.env.runs(), r, supervisor.StartOptions{Executable: s.app.Executable, MaxParallel: maxParallel, Env: s.app.envValues(r)}); err != nil {
		return nil, err
	}
	end, err := supervisor.WaitEnd(ctx, s.env.runs(), r.ID, 25*time.Millisecond)
	if err != nil && ctx.Err() != nil {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, cerr := supervisor.Cancel(bg, s.env.runs(), r.ID); cerr == nil {
			if e, werr := supervisor.WaitEnd(bg, s.env.runs(), r.ID, 25*time.Millisecond); werr == nil {
				end = e
			}
		}
		return end, err
	}
	return end, err
}

// warn prints each distinct warning once.
func (s *benchSubmitter) warn(warnings []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range warnings {
		if !s.warned[w] {
			s.warned[w] = true
			fmt.Fprintf(s.app.Stderr, "warning: %s\n", catalog.NameFields(w, flagName))
		}
	}
}
