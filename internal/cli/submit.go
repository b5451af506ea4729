package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/workspace"
)

type submitOptions struct {
	Repo         string
	Subdir       string
	Base         string
	Agent        string
	AgentCmd     string
	Checks       []string
	Attempts     int
	Timeout      string
	Sandbox      string
	Env          []string
	IncludeDirty bool
	Wait         bool
	Follow       bool
	TaskFile     string
	Network      string
	Allow        []string
	LoopbackTCP  bool
	MaxFiles     int
	MaxBytes     int64
	Disk         string
	DiskInodes   int64
	MaxParallel  int
	Model        string
	Provider     string
	BaseURL      string
	MaxTurns     int
	ContextWin   int
	Temperature  float64
	ModelServer  string
	Quiet        bool
	MaxTokens    int64
	MaxCost      float64
	ReadOnly     []string
	Labels       []string
	Image        string
	Setup        string
	NoSetup      bool
	SetupAllow   []string
	Toolchains   []string
	Workspace    string
	History      string
	Include      []string
	NoInclude    bool
	Author       string
	Args         []string

	set func(name string) bool // whether a flag was given
}

// Validate checks what only the command line has: flag combinations, the
// task's source, flags given a value they cannot take. The request's own
// values are checked once, by submit.Validate; it reads nothing.
func (o *submitOptions) Validate() error {
	switch {
	case o.Wait && o.Follow:
		return catalog.ConflictFlags.New("--wait and --follow")
	case o.Quiet && o.Follow:
		return catalog.ConflictFlags.New("--quiet and --follow")
	case len(o.Args) > 0 && o.TaskFile != "":
		return catalog.ConflictFlags.New("a TASK argument and --task-file")
	case len(o.Args) > 1:
		return catalog.Usage.New("give the task as one argument (quote it), '-' for stdin, or --task-file")
	case o.set("max-parallel") && o.MaxParallel < 1:
		return catalog.Usage.New("--max-parallel must be at least 1")
	case o.set("attempts") && o.Attempts < 1:
		return catalog.BadAttempts.New("--attempts %d", o.Attempts)
	case o.set("max-files") && o.MaxFiles < 1, o.set("max-bytes") && o.MaxBytes < 1:
		return catalog.Usage.New("--max-files and --max-bytes must be at least 1")
	case o.set("disk-inodes") && o.DiskInodes < 1:
		return catalog.Usage.New("--disk-inodes must be at least 1")
	case o.set("max-turns") && o.MaxTurns < 1:
		return catalog.Usage.New("--max-turns must be at least 1")
	case o.NoSetup && (o.Setup != "" || len(o.SetupAllow) > 0):
		return catalog.ConflictFlags.New("--no-setup with --setup or --setup-allow")
	case o.set("workspace") && !config.ValidWorkspace(o.Workspace):
		return catalog.BadWorkspace.New("--workspace %q", o.Workspace)
	case o.set("history") && !config.ValidHistory(o.History):
		return catalog.BadHistory.New("--history %q", o.History)
	case o.NoInclude && len(o.Include) > 0:
		return catalog.ConflictFlags.New("--include and --no-include")
	case o.set("base-url") && o.set("model-server"):
		return catalog.ConflictFlags.New("--base-url and --model-server (for the built-in agent they are the same)")
	}
	if o.set("disk") {
		if n, err := run.ParseSize(o.Disk); err != nil || n < 1 {
			return catalog.Usage.New("--disk %q: want a size of at least 1 byte, like 10G or 512M", o.Disk)
		}
	}
	if o.Timeout != "" {
		if _, err := time.ParseDuration(o.Timeout); err != nil {
			return catalog.BadDuration.New("--timeout %q", o.Timeout)
		}
	}
	if _, err := parseLabels(o.Labels); err != nil {
		return err
	}
	if _, _, err := parseAuthor(o.Author); o.set("author") && err != nil {
		return err
	}
	_, err := parseChecks(o.Checks)
	return err
}

// parseAuthor reads --author's "NAME <EMAIL>", as git writes an author.
func parseAuthor(s string) (name, email string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", catalog.Usage.New("--author %q: %s", s, why).WithFix(`give it as --author "Your Name <you@example.com>"`)
	}
	open := strings.LastIndexByte(s, '<')
	if open < 0 || !strings.HasSuffix(s, ">") {
		return bad("want NAME <EMAIL>")
	}
	name, email = strings.TrimSpace(s[:open]), strings.TrimSpace(s[open+1:len(s)-1])
	switch {
	case name == "" || email == "":
		return bad("both the name and the email are needed")
	case strings.ContainsAny(name, "<>\n\r\x00") || strings.ContainsAny(email, "<>\n\r\x00 "):
		return bad("a name or an email cannot hold <, >, a line break or a NUL (nor an email a space)")
	}
	return name, email, nil
}

// labelKey is what a label's key may be (an agent host's label keys are
// the same).
var labelKey = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// parseLabels reads each --label KEY=VALUE (nil: none).
func parseLabels(specs []string) (map[string]string, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	if len(specs) > 64 {
		return nil, catalog.Usage.New("--label: at most 64 labels")
	}
	out := map[string]string{}
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || !labelKey.MatchString(k) || len(v) > 256 {
			return nil, catalog.Usage.New("--label %q: want KEY=VALUE, a key of letters, digits, '.', '-' and '_' (at most 64), a value of at most 256 bytes", s)
		}
		out[k] = v
	}
	return out, nil
}

// parseChecks splits each --check NAME=COMMAND (submit.Validate judges
// the names and commands).
func parseChecks(specs []string) ([]run.CheckSpec, error) {
	var out []run.CheckSpec
	for _, s := range specs {
		name, cmd, ok := strings.Cut(s, "=")
		if !ok {
			return nil, catalog.BadCheck.New("%q has no '='", s)
		}
		out = append(out, run.CheckSpec{Name: name, Command: cmd})
	}
	return out, nil
}

// flagName is how the command line names a request field: its flag.
func flagName(field string) string { return "--" + strings.ReplaceAll(field, "_", "-") }

func (app *App) newSubmitCmd() *cobra.Command {
	o := &submitOptions{}
	c := &cobra.Command{
		Use:   "submit [flags] (TASK | - | --task-file F)",
		Short: "Start a run: an agent works on a copy of the repository in a sandbox",
		Long:  app.submitHelp(),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Args = args
			o.set = func(n string) bool { return cmd.Flags().Changed(n) }
			if err := o.Validate(); err != nil {
				return err
			}
			if app.remote != nil {
				return app.remoteSubmit(cmd.Context(), o)
			}
			return app.runSubmit(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", ".", "directory inside the git repository to work on: the agent and the checks start there")
	f.StringVar(&o.Subdir, "subdir", "", "start the agent and the checks in this directory, relative to the repository's top (default: where --repo is in it)")
	f.StringVar(&o.Base, "base", "HEAD", "base commit, branch or tag")
	f.StringVar(&o.Agent, "agent", "", "agent profile: "+strings.Join(append(app.Deps.Agents.Names(), agent.BuiltinName), ", "))
	f.StringVar(&o.AgentCmd, "agent-cmd", "", "run this command as the agent (sh -c in the sandbox; task on stdin)")
	f.StringArrayVar(&o.Checks, "check", nil, "verify check NAME=COMMAND, run in the sandbox after each attempt (repeatable)")
	f.IntVar(&o.Attempts, "attempts", 0, fmt.Sprintf("agent attempts at most (default %d)", config.DefaultAttempts))
	f.StringVar(&o.Timeout, "timeout", "", fmt.Sprintf("time limit of the whole run from its start, queueing excluded (default %s; 0 = none)", config.DefaultTimeout))
	f.StringVar(&o.Sandbox, "sandbox", "", "sandbox backend")
	f.StringArrayVar(&o.Env, "env", nil, "pass this variable from your environment to the agent (repeatable)")
	f.BoolVar(&o.IncludeDirty, "include-dirty", false, "accept a repository with uncommitted changes (they are not included)")
	f.BoolVar(&o.Wait, "wait", false, "wait for the run to end; exit 1 if it did not succeed")
	f.BoolVar(&o.Follow, "follow", false, "stream events and agent output until the run ends")
	f.StringVar(&o.TaskFile, "task-file", "", "read the task from this file")
	f.StringVar(&o.Network, "network", "", "none or allowlist")
	f.BoolVar(&o.LoopbackTCP, "loopback-tcp", false, "let the agent and checks connect to servers they start on the sandbox's own loopback (native; the sandbox still has no other network)")
	f.StringArrayVar(&o.Allow, "allow", nil, "allow HOST, HOST:PORT, *.DOMAIN, IP, CIDR or preset:NAME (repeatable)")
	f.IntVar(&o.MaxFiles, "max-files", 0, fmt.Sprintf("export at most this many changed files (default %d)", config.DefaultMaxFiles))
	f.Int64Var(&o.MaxBytes, "max-bytes", 0, fmt.Sprintf("export at most this many bytes (default %d)", config.DefaultMaxBytes))
	f.StringVar(&o.Disk, "disk", "", "bound what the sandbox holds in the workspace, HOME, /tmp and /dev/shm together, like 10G (native default 16G; past it: ENOSPC in /tmp, the run ends disk_exceeded)")
	f.Int64Var(&o.DiskInodes, "disk-inodes", 0, "bound the files and directories the sandbox holds there together (native default 1000000)")
	f.IntVar(&o.MaxParallel, "max-parallel", 0, fmt.Sprintf("runs at once on this machine (default %d)", config.DefaultMaxParallel))
	f.StringVar(&o.Model, "model", "", "model to ask for (default: the profile's)")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "print only the run id (with --wait: when it ends; the exit status says how)")
	f.StringVar(&o.ModelServer, "model-server", "", "send model traffic to this server: a URL (http://localhost:1234; an OpenAI-compatible API as its clients name it, .../v1 or .../api/paas/v4) or a [model_servers] name")
	f.Int64Var(&o.MaxTokens, "max-tokens", 0, "end the run when its model use reaches this many tokens (input + output; 0 = no limit)")
	f.Float64Var(&o.MaxCost, "max-cost", 0, "end the run when its estimated model cost reaches this many US dollars (0 = no limit)")
	f.StringArrayVar(&o.ReadOnly, "ro", nil, "make this host path visible read-only inside the sandbox, at its own path (repeatable; one under /tmp is shown on the sandbox's own /tmp)")
	f.StringArrayVar(&o.Labels, "label", nil, "team server: hand the run only to an agent host with this `KEY=VALUE` label (repeatable)")
	f.StringVar(&o.Workspace, "workspace", "", "auto (an overlay over a cached checkout where the sandbox can mount one, else a full copy), copy (never the layer cache) or overlay (fail where none can be mounted); default auto")
	f.StringVar(&o.History, "history", "", "shallow (the agent sees the base commit only) or full (also the repository's whole history, read-only: every branch's objects); default shallow")
	f.StringArrayVar(&o.Include, "include", nil, "copy the git-ignored files of your working tree matching this gitignore-style PATTERN into the workspace, besides those .worktreeinclude lists (repeatable; never exported)")
	f.BoolVar(&o.NoInclude, "no-include", false, "do not read .worktreeinclude: copy no git-ignored files into the workspace")
	f.StringVar(&o.Image, "image", "", "image of the docker sandbox: REF@sha256:DIGEST or a local image id (a tag only if pinned in [images] of the config); never pulled")
	f.StringVar(&o.Setup, "setup", "", "setup command (sh -c in a sandbox on the checkout, once per base commit): its result is a cached read-only layer under the workspace (default: setup in the repository's .agentrun.toml)")
	f.BoolVar(&o.NoSetup, "no-setup", false, "run no setup command, not even the repository's")
	f.StringArrayVar(&o.SetupAllow, "setup-allow", nil, "let the setup command reach HOST (as --allow; repeatable; default: setup_allow in config.toml, else no network)")
	f.StringArrayVar(&o.Toolchains, "toolchain-cache", nil, "show the host's go, npm, pip or cargo cache read-only to the run (repeatable; default: toolchain_caches in config.toml)")
	f.StringVar(&o.Author, "author", "", "author and committer of the result commit, as `\"NAME <EMAIL>\"` (default: author_name and author_email of the settings, else the repository's user.name and user.email)")
	f.StringVar(&o.Provider, "provider", "", "openai or anthropic (builtin agent)")
	f.StringVar(&o.BaseURL, "base-url", "", "model server URL (builtin agent; same as --model-server)")
	f.IntVar(&o.MaxTurns, "max-turns", 0, "turn limit per attempt (builtin agent)")
	f.IntVar(&o.ContextWin, "context-window", 0, "model context window in tokens (builtin agent; default: AGENTRUN_CONTEXT_WINDOW, what the server reports, a built-in table)")
	f.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature (builtin agent; default: the server's)")
	return c
}

// submitHelp is submit's long help: agents, models, sandbox, environment
// and configuration.
func (app *App) submitHelp() string {
	return `Start a run. The agent works on its own checkout of the base commit inside a
sandbox; after each attempt the checks run in the same sandbox; a run whose
checks all pass is exported as one commit on branch agentrun/<id> plus a patch.

The task reaches the agent on stdin, never through a shell. It is the TASK
argument, stdin with '-', or the file given with --task-file.

Agents: --agent-cmd CMD runs any command (sh -c inside the sandbox, the task on
stdin). --agent NAME picks a profile (the CLI must be on your PATH; it and its
runtime are made visible read-only inside the sandbox):
` + profileHelp(app.Deps.Agents) + `  builtin    the built-in tool-use loop (--model, --provider, --base-url)

Models: every agent reaches its model through the run's model gateway, on the
host, which holds the keys: the sandbox gets a placeholder key and needs no
network for the model. --model NAME picks the model; --model-server URL|NAME
sends the model traffic to your own server (LM Studio, Ollama, vLLM,
llama.cpp; also one on this machine's localhost) instead of the provider's API.
Without them, a CLI set up in your environment for an endpoint of its own
goes there as it does bare: ANTHROPIC_BASE_URL (claude), OPENAI_BASE_URL
(qwen), GOOGLE_GEMINI_BASE_URL (gemini), with their model variables
(ANTHROPIC_MODEL, OPENAI_MODEL, GEMINI_MODEL).
Keys come from your environment (ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN,
OPENAI_API_KEY, GEMINI_API_KEY, DASHSCOPE_API_KEY) or from a key file or command
named in config.toml; they are never written to disk or into the sandbox.
--max-tokens N and --max-cost USD bound the run's model use: past them the run
ends budget_exceeded, its workspace kept, and 'agentrun resume ID --max-cost N'
continues it.

Sandbox: --sandbox NAME (` + strings.Join(app.Deps.backendNames(), ", ") + `). 'host' does not isolate and is
used only when named. Network: --network none|allowlist; --allow HOST[:PORT] or
preset:NAME (repeatable). Every agent gets no network unless --allow is given
(then only the allowlist, plus what its profile's CLI needs besides the model).
--allow 127.0.0.1:PORT makes a service on this machine's loopback reachable
inside at that same address, through the proxy.
--ro PATH makes a further host path visible read-only.

Environment: the sandbox gets only PATH, HOME, LANG, TERM and TMPDIR (and the
variables that point toolchains at a setup layer's HOME or a toolchain cache,
GOMODCACHE, GOFLAGS, npm_config_cache, ...; with an allowlist, the proxy
variables, JAVA_TOOL_OPTIONS among them); the agent (not the checks) also gets
what its profile sets (the gateway's URL and the placeholder key) and the
variables named with --env NAME, whose values are read from your environment
now and handed to the run's supervisor over a pipe; they are never written to
disk. 'agentrun resume' therefore needs them (and the keys)
in its environment again.

Setup snapshots: --setup CMD (or setup = "CMD" in .agentrun.toml at the top of
the repository, read from the base commit) runs once per base commit, command,
setup allowlist and sandbox, in a sandbox of its own on the checkout; what it
changed in the workspace, and what it left in its HOME (e.g. Go's module
cache), is kept as a read-only layer that every later run with the same key
starts on, so checks run offline. Its network is --setup-allow HOST (or
setup_allow in config.toml) only; a repository's setup_allow opens nothing.
--no-setup skips it. --toolchain-cache go|npm|pip|cargo shows that host cache
read-only (toolchain_caches in config.toml). 'agentrun setup --status' lists
the setup layers.

A repository with uncommitted changes is refused unless --include-dirty; either
way the run starts from the base commit, without them.

Workspace: --workspace auto (default: an overlay over a cached checkout of the
base commit where the sandbox can mount one, else a full copy), copy (always
the full copy, never the layer cache) or overlay (refused where none can be
mounted). Git-ignored files of your working tree are copied in only on request:
those .worktreeinclude (at the top of the working tree) lists, and those
--include PATTERN matches; --no-include turns the file off. They are listed in
the run's provenance and never exported. --history shallow (default) gives the
agent the base commit alone; --history full also your repository's whole object
store, read-only (every branch's history; native and docker sandboxes only).

Configuration: $XDG_CONFIG_HOME/agentrun/config.toml (max_parallel, sandbox,
attempts, timeout, author_name, author_email, max_files, max_bytes, disk,
disk_inodes, disk_budget, workspace, history, max_tokens,
max_cost, model_server, setup_allow, toolchain_caches, [model_servers.NAME] url/max_concurrent/api_key_*,
[providers.NAME] url/api_key_*, [prices.MODEL] input/output/cached_input);
environment AGENTRUN_HOME (data directory), AGENTRUN_MAX_PARALLEL,
AGENTRUN_SANDBOX, AGENTRUN_ATTEMPTS, AGENTRUN_TIMEOUT, AGENTRUN_AUTHOR_NAME,
AGENTRUN_AUTHOR_EMAIL, AGENTRUN_MAX_TOKENS, AGENTRUN_MAX_COST,
AGENTRUN_MODEL_SERVER.
Precedence: flag > environment > config file > default.

--wait blocks until the run ends; --follow also streams its events and the
agent's output. Ctrl-C while waiting leaves the run running (exit 130).`
}

func profileHelp(agents agent.Catalog) string {
	var b strings.Builder
	for _, p := range agents {
		tested := "not tested"
		if p.Tested != "" {
			tested = "tested with " + p.TestedWith()
		}
		fmt.Fprintf(&b, "  %-10s %s; %s; %s\n", p.Name, p.Doc, tested, p.Install)
	}
	return b.String()
}

// submitOutput is submit's JSON document.
type submitOutput struct {
	ID     string     `json:"id"`
	Status run.State  `json:"status"`
	Reason run.Reason `json:"reason"`
	Branch string     `json:"branch"`
	Commit string     `json:"commit"`
	Patch  string     `json:"patch"`
	RunDir string     `json:"run_dir"`
	// Warnings are what the submit warned of as it planned the run
	// (never null).
	Warnings []string `json:"warnings"`
}

func (app *App) runSubmit(ctx context.Context, o *submitOptions) error {
	s, err := config.Load(app.Getenv)
	if err != nil {
		return err
	}
	req := o.request(s, app.Getenv)
	if app.env != nil { // a team server's
		req.HostHas, req.AnyHost, req.OnHosts = app.env.HostHas, app.env.AnyHost, app.env.OnHosts
	}
	if home := DataHome(app.Getenv); filepath.IsAbs(home) {
		// The data directory's layout, for the workspace's preflight;
		// opening it (which creates it) waits until the run is planned.
		req.Data = &layout.Layout{Home: home}
		req.Commits = workspace.NewCommitCache(req.Data.CommitCache())
	}
	// The request's values are refused before the task is read (stdin
	// may be a terminal); Plan checks them again, with the task.
	if err := submit.Validate(req); err != nil {
		return err
	}
	var ahead *supervisor.Pending
	if app.Deps.StartAhead && app.Deps.Mode == "" && req.Data != nil {
		// If it cannot start, Start spawns one as it would have.
		ahead, _ = supervisor.Prespawn(*req.Data, app.Executable, cmp.Or(req.Sandbox, app.Deps.DefaultBackend))
		defer ahead.Abandon()
	}
	if req.Task, err = app.readTask(o); err != nil {
		return err
	}
	svc := app.Deps.submitService()
	if svc.Policy, err = app.policyInForce(s); err != nil {
		return err
	}
	r, warnings, err := svc.Plan(ctx, req)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		w = catalog.NameFields(w, flagName)
		fmt.Fprintf(app.Stderr, "warning: %s\n", w)
		r.Warnings = append(r.Warnings, w)
	}
	if p, ok := server.PrincipalFrom(ctx); ok {
		r.SubmittedBy = &run.Submitter{ID: p.UserID, Name: p.Name}
	}
	if r.Labels, _ = parseLabels(o.Labels); r.Labels != nil && app.Deps.Mode != "server" {
		app.warn("--label steers a team server's runs to its agent hosts; on this machine it is only recorded")
	}
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	maxParallel := s.MaxParallel
	if o.MaxParallel > 0 {
		maxParallel = o.MaxParallel
	}
	if err := supervisor.Start(ctx, env.runs(), r, supervisor.StartOptions{
		MaxParallel: maxParallel, Env: app.envValues(r), Pending: ahead,
	}); err != nil {
		return err
	}
	req.Commits.Keep() // the run is made: what the plan learned of its base is kept
	app.quiet, app.changes = o.Quiet, ahead.Changes()
	return app.afterStart(ctx, env, r, o.Wait, o.Follow)
}

// request is the submit request of these flags over the settings
// (flag > environment > config file > default), without the task.
func (o *submitOptions) request(s config.Settings, getenv func(string) string) submit.Request {
	checks, _ := parseChecks(o.Checks) // (Validate refused what does not parse)
	models := submit.ModelRequest{
		Model: o.Model, Server: cmp.Or(o.ModelServer, s.ModelServer), Servers: s.File.ModelServers, Providers: s.File.Providers,
		Prices: s.File.Prices, MaxTokens: s.MaxTokens, MaxCost: s.MaxCost,
	}
	if o.set("max-tokens") {
		models.MaxTokens = o.MaxTokens
	}
	if o.set("max-cost") {
		models.MaxCost = o.MaxCost
	}
	for _, field := range []string{"provider", "base_url", "max_turns", "context_window", "temperature"} {
		if o.set(flagName(field)[2:]) {
			models.BuiltinFields = append(models.BuiltinFields, field)
		}
	}
	req := submit.Request{
		Repo: o.Repo, Subdir: o.Subdir, BaseRef: o.Base, AgentName: o.Agent, AgentCmd: o.AgentCmd,
		Builtin:  run.AgentSpec{Model: o.Model, Provider: o.Provider, BaseURL: o.BaseURL, MaxTurns: o.MaxTurns, ContextWindow: o.ContextWin},
		EnvNames: o.Env, Checks: checks, Attempts: s.Attempts, Timeout: s.Timeout,
		Sandbox: cmp.Or(o.Sandbox, s.Sandbox), Network: o.Network, Allow: o.Allow, LoopbackTCP: o.LoopbackTCP, IncludeDirty: o.IncludeDirty,
		Export:  run.ExportConfig{MaxFiles: s.MaxFiles, MaxBytes: s.MaxBytes, AuthorName: s.AuthorName, AuthorEmail: s.AuthorEmail},
		Version: Version, Getenv: getenv, Models: models, ReadOnly: o.ReadOnly,
		Image: cmp.Or(o.Image, s.Image), ImagePins: s.File.Images, ImageNamed: o.Image != "",
		Limits:     run.Limits{DiskBytes: s.DiskBytes, DiskInodes: s.DiskInodes},
		Workspace:  run.WorkspaceSpec{Mode: cmp.Or(o.Workspace, s.Workspace), History: cmp.Or(o.History, s.History), Include: o.Include, NoInclude: o.NoInclude},
		DiskBudget: s.DiskBudget,
		Setup:      o.Setup, NoSetup: o.NoSetup, SetupAllow: s.File.SetupAllow, Toolchains: s.File.ToolchainCaches,
	}
	if o.set("setup-allow") {
		req.SetupAllow = o.SetupAllow
	}
	if name, email, err := parseAuthor(o.Author); o.Author != "" && err == nil {
		req.Export.AuthorName, req.Export.AuthorEmail = name, email
	}
	if o.set("toolchain-cache") {
		req.Toolchains = o.Toolchains
	}
	if o.set("attempts") {
		req.Attempts = o.Attempts
	}
	if o.set("temperature") {
		t := o.Temperature
		req.Builtin.Temperature = &t
	}
	if o.Timeout != "" {
		req.Timeout, _ = time.ParseDuration(o.Timeout)
	}
	if o.MaxFiles > 0 {
		req.Export.MaxFiles = o.MaxFiles
	}
	if o.MaxBytes > 0 {
		req.Export.MaxBytes = o.MaxBytes
	}
	if o.set("disk") {
		req.Limits.DiskBytes, _ = run.ParseSize(o.Disk)
	}
	if o.set("disk-inodes") {
		req.Limits.DiskInodes = o.DiskInodes
	}
	return req
}

// afterStart prints the run, or waits for / follows it.
func (app *App) afterStart(ctx context.Context, env *Env, r *run.Run, wait, follow bool) error {
	if app.quiet && !app.JSON {
		if wait {
			end, err := app.awaitRun(ctx, env, r.ID, false, nil)
			if err != nil {
				return err
			}
			fmt.Fprintln(app.Stdout, r.ID)
			if end.State != run.StateSucceeded {
				return &reported{exit: catalog.ExitRunFailed}
			}
			return nil
		}
		fmt.Fprintln(app.Stdout, r.ID)
		return nil
	}
	if !wait && !follow {
		if app.JSON {
			return writeJSON(app.Stdout, toSubmitOutput(env, r))
		}
		fmt.Fprintf(app.Stdout, "run %s %s\nbranch %s (once it succeeds)\n", r.ID, r.State, r.Branch)
		fmt.Fprintf(app.Stdout, "follow it with: agentrun logs -f %s\n", r.ID)
		return nil
	}
	var prog *progress
	if !app.JSON && !follow {
		fmt.Fprintf(app.Stderr, "run %s %s; waiting for it to end (Ctrl-C stops waiting, not the run)\n", r.ID, r.State)
		prog = newProgress(app.Stderr, isTerminal(app.Stderr) && app.Getenv("TERM") != "dumb", r.MaxAttempts, time.Now())
		if len(r.Attempts) == 0 && r.Repo != "" && r.Base != "" {
			prog.files = newFileCount(r.Repo, r.Base, env.Layout.Workspace(r.ID))
			cache, state, base := workspace.NewLayerCache(env.Layout.LayerCache()), env.Layout.WorkspaceState(r.ID), r.Base
			prog.files.overlay = func() string { return cache.OverlayProgress(state, base) }
		}
	}
	end, err := app.awaitRun(ctx, env, r.ID, follow, prog)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(app.Stderr, "stopped waiting; run %s goes on. Follow it again with: agentrun logs -f %s\n", r.ID, r.ID)
		}
		return err
	}
	switch {
	case app.JSON && follow:
		// The stream is JSON Lines: events, agent output, then the result.
		if err := writeJSONLineCompact(app.Stdout, newEndLine(env, end)); err != nil {
			return err
		}
	case app.JSON:
		if err := writeJSON(app.Stdout, toSubmitOutput(env, end)); err != nil {
			return err
		}
	default:
		app.printEnd(ctx, env, end)
	}
	if end.State != run.StateSucceeded {
		return &reported{exit: catalog.ExitRunFailed}
	}
	return nil
}

// readTask reads the task from the argument, stdin ('-') or --task-file.
func (app *App) readTask(o *submitOptions) (string, error) {
	var task string
	switch {
	case o.TaskFile != "":
		f, err := os.Open(o.TaskFile)
		if err != nil {
			return "", catalog.TaskFile.Wrap(err, "%v", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, submit.MaxTaskBytes+1))
		f.Close()
		if err != nil {
			return "", catalog.TaskFile.Wrap(err, "%v", err)
		}
		task = string(b)
	case len(o.Args) == 1 && o.Args[0] == "-":
		// Read one byte past the limit: a longer task is refused, never cut.
		b, err := io.ReadAll(io.LimitReader(app.Stdin, submit.MaxTaskBytes+1))
		if err != nil {
			return "", catalog.TaskFile.Wrap(err, "stdin: %v", err)
		}
		task = string(b)
	case len(o.Args) == 1:
		task = o.Args[0]
	}
	return task, nil // (Plan refuses an empty or too large one)
}

// envValues reads from this command's environment the variables the run's
// supervisor needs: those its agent gets (--env) and those its model
// gateway reads keys from (they stay in the supervisor, outside the
// sandbox).
func (app *App) envValues(r *run.Run) map[string]string {
	return submit.HandoffValues(r, app.Getenv)
}

// awaitRun polls the run until it ends; with follow it prints the journal
// and the agent's output as they come; with prog it shows the progress.
// Without follow (the agent's output is not copied as it comes), a run
// that lasts longer than watchAfter is watched: a watch on its directory
// wakes the wait at each change, and the polls slow down. (Not from the
// start: closing an inotify instance waits for the kernel's grace period,
// about 10 ms, which a short run's wait would pay at its end.)
func (app *App) awaitRun(ctx context.Context, env *Env, id string, follow bool, prog *progress) (*run.Run, error) {
	var watch *runWatch
	watched := false
	defer func() { watch.Close() }()
	var after int64
	var logOff int64
	attempt := 0
	began := time.Now()
	lastRead, lastSaid := time.Time{}, began
	if prog != nil {
		defer prog.done()
	}
	for {
		r, err := env.Store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r, err = supervisor.Reconcile(ctx, env.runs(), r); err != nil {
			return nil, err
		}
		if follow {
			evs, err := env.Store.Events(ctx, id, after)
			if err != nil {
				return nil, err
			}
			for _, e := range evs {
				after = e.Seq
				if e.Type == run.EventAttempt && e.Attempt > attempt {
					// The previous attempt's output is complete: its
					// last lines come before the next attempt starts.
					if attempt > 0 {
						app.copyLog(env.Layout.AgentLog(id, attempt), attempt, logOff, true)
					}
					attempt, logOff = e.Attempt, 0
				}
				app.printEvent(e)
			}
			if len(evs) > 0 {
				lastSaid = time.Now()
			}
			if attempt > 0 {
				// r was read first: once it has ended, the log is whole.
				logOff = app.copyLog(env.Layout.AgentLog(id, attempt), attempt, logOff, r.State.Terminal())
			}
			// A long silent step (making a big workspace) still says it is alive.
			if !app.JSON && time.Since(lastSaid) >= followHeartbeat {
				fmt.Fprintf(app.Stderr, "%s still %s\n", stamp(time.Since(began)), r.State)
				lastSaid = time.Now()
			}
		}
		if prog != nil && (time.Since(lastRead) >= 100*time.Millisecond || r.State.Terminal()) {
			lastRead = time.Now()
			evs, err := env.Store.Events(ctx, id, after)
			if err == nil {
				for _, e := range evs {
					after = e.Seq
					prog.event(e, lastRead)
				}
			}
			prog.tick(lastRead)
		}
		if r.State.Terminal() {
			return r, nil
		}
		if !watched && !follow && app.changes == nil && time.Since(began) >= watchAfter {
			// (nil where it cannot watch: the wait only polls; none
			// while the supervisor tells each change itself)
			watched = true
			if watch = watchRun(env.Layout.RunDir(id)); watch != nil {
				continue // read once more: a change may have come before the watch
			}
		}
		poll := watch.poll(time.Since(began))
		if app.changes != nil && !follow {
			// The supervisor tells each change of state while it lives:
			// the polls only back that up (and draw the progress).
			poll = max(poll, heardPoll)
			if prog != nil {
				poll = min(poll, progressPoll)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-watch.C():
		case _, ok := <-app.changes:
			if !ok {
				app.changes = nil // the supervisor has exited: polls alone from here
			}
		case <-time.After(poll):
		}
	}
}

// heardPoll is how often a wait polls while the run's supervisor tells
// it of each change of state (App.changes): a supervisor that exits or
// dies is heard too (its socket closes), so these polls are a second line
// only, and a wait costs next to no CPU beside the agent. progressPoll
// is how often it reads the run while it draws progress (at most
// heardPoll).
const (
	heardPoll    = time.Second
	progressPoll = 100 * time.Millisecond
)

// followHeartbeat is how long --follow may be silent before it says the
// run is still in its state.
const followHeartbeat = 15 * time.Second

// awaitPoll is the polling interval after waiting for d: quick while a
// short run is likely to end (a read of run.json costs microseconds; the
// wait adds half an interval on average to a run's time), then gentler.
func awaitPoll(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return 2 * time.Millisecond
	case d < 2*time.Second:
		return 5 * time.Millisecond
	case d < 30*time.Second:
		return 25 * time.Millisecond
	}
	return 100 * time.Millisecond
}

func (app *App) printEvent(e run.Event) {
	if app.JSON {
		_ = writeJSONLineCompact(app.Stdout, e)
		return
	}
	msg := e.Message
	if e.Type == run.EventState {
		msg = string(e.State)
		if e.Reason != "" {
			msg += " (" + string(e.Reason) + ")"
		}
		if e.Message != "" {
			msg += ": " + e.Message
		}
	}
	fmt.Fprintf(app.Stdout, "%s %-8s %s\n", e.Time.Local().Format("15:04:05"), e.Type, msg)
}

// copyLog prints what the agent log of attempt at path has beyond off and
// returns the new offset. Under --json each whole line is an output line
// as logs -f --json prints it; an unfinished last line waits for its end,
// or for final (the log is complete).
func (app *App) copyLog(path string, attempt int, off int64, final bool) int64 {
	f, err := os.Open(path)
	if err != nil {
		return off
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
	if !app.JSON {
		n, _ := app.Stdout.Write(b)
		return off + int64(n)
	}
	n := len(b)
	if final && n > 0 && b[n-1] != '\n' {
		b = append(b, '\n')
	}
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		return off
	}
	for _, line := range strings.Split(string(b[:i]), "\n") {
		_ = writeJSONLineCompact(app.Stdout, outputLine(attempt, "agent", "", line))
	}
	return off + int64(min(i+1, n))
}

func writeJSONLineCompact(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
