package mcp

import (
	"strconv"
)

// argv builds one agentrun command line from typed input. Every value is
// glued to its flag (--flag=VALUE): a value that starts with '-' stays a
// value. A zero value is left out, so the command's own default (flag >
// environment > config file > default) applies.
type argv []string

func command(name ...string) *argv {
	a := argv(append(append([]string{}, name...), "--json"))
	return &a
}

func (a *argv) str(flag, v string) *argv {
	if v != "" {
		*a = append(*a, "--"+flag+"="+v)
	}
	return a
}

func (a *argv) strs(flag string, vs []string) *argv {
	for _, v := range vs {
		*a = append(*a, "--"+flag+"="+v)
	}
	return a
}

func (a *argv) num(flag string, v int64) *argv {
	if v != 0 {
		*a = append(*a, "--"+flag+"="+strconv.FormatInt(v, 10))
	}
	return a
}

// ptrInt and ptrFloat pass a value that was given, zero included (zero
// means "no limit" for a budget, which must override a configured one).
func (a *argv) ptrInt(flag string, v *int64) *argv {
	if v != nil {
		*a = append(*a, "--"+flag+"="+strconv.FormatInt(*v, 10))
	}
	return a
}

func (a *argv) ptrFloat(flag string, v *float64) *argv {
	if v != nil {
		*a = append(*a, "--"+flag+"="+strconv.FormatFloat(*v, 'g', -1, 64))
	}
	return a
}

func (a *argv) on(flag string, v bool) *argv {
	if v {
		*a = append(*a, "--"+flag)
	}
	return a
}

// args ends the flags: what follows is positional, whatever it looks like.
func (a *argv) args(pos ...string) []string {
	return append(append(*a, "--"), pos...)
}

// Check is one verify check of a submit.
type Check struct {
	Name    string `json:"name" jsonschema:"the check's name: letters, digits, '.', '-', '_'"`
	Command string `json:"command" jsonschema:"the command, run with sh -c inside the sandbox after each attempt; exit 0 passes"`
}

// SubmitInput is the submit tool's input: submit's flags, by the names of
// the request fields they set.
type SubmitInput struct {
	Task         string   `json:"task" jsonschema:"what the agent should do; it reaches the agent on stdin, never through a shell"`
	Repo         string   `json:"repo,omitempty" jsonschema:"a directory inside the git repository to work on: the agent and the checks start there (default: the server's working directory)"`
	Subdir       string   `json:"subdir,omitempty" jsonschema:"the directory, relative to the repository's top, where the agent and the checks start (default: where repo is in the repository)"`
	Base         string   `json:"base,omitempty" jsonschema:"base commit, branch or tag (default HEAD)"`
	Agent        string   `json:"agent,omitempty" jsonschema:"agent profile (claude, codex, gemini, qwen, opencode, crush, ...) or builtin; see 'agentrun submit --help'"`
	AgentCmd     string   `json:"agent_cmd,omitempty" jsonschema:"run this command as the agent instead of a profile (sh -c inside the sandbox, the task on stdin)"`
	Checks       []Check  `json:"checks,omitempty" jsonschema:"verify checks, run in the sandbox after each attempt; a failed check with attempts left starts another attempt"`
	Attempts     int64    `json:"attempts,omitempty" jsonschema:"agent attempts at most (default 1 or the configured value)"`
	Timeout      string   `json:"timeout,omitempty" jsonschema:"time limit of the whole run, like 30m or 2h (0 = none)"`
	Sandbox      string   `json:"sandbox,omitempty" jsonschema:"sandbox backend: native (isolating, Linux) or host (no isolation, only when named)"`
	Env          []string `json:"env,omitempty" jsonschema:"names of variables whose values the agent gets from the server's environment"`
	IncludeDirty bool     `json:"include_dirty,omitempty" jsonschema:"accept a repository with uncommitted changes (the run still starts from the base commit, without them)"`
	Network      string   `json:"network,omitempty" jsonschema:"none or allowlist"`
	Allow        []string `json:"allow,omitempty" jsonschema:"allowed destinations: HOST, HOST:PORT, *.DOMAIN, IP, CIDR or preset:NAME"`
	LoopbackTCP  bool     `json:"loopback_tcp,omitempty" jsonschema:"let the agent and checks reach servers they start on the sandbox's own loopback (native)"`
	MaxFiles     int64    `json:"max_files,omitempty" jsonschema:"export at most this many changed files"`
	MaxBytes     int64    `json:"max_bytes,omitempty" jsonschema:"export at most this many bytes"`
	Disk         string   `json:"disk,omitempty" jsonschema:"bound what the sandbox holds on disk, like 10G"`
	DiskInodes   int64    `json:"disk_inodes,omitempty" jsonschema:"bound the files and directories the sandbox holds"`
	MaxParallel  int64    `json:"max_parallel,omitempty" jsonschema:"runs at once on this machine"`
	Model        string   `json:"model,omitempty" jsonschema:"model to ask for (default: the profile's)"`
	Provider     string   `json:"provider,omitempty" jsonschema:"openai or anthropic (builtin agent)"`
	BaseURL      string   `json:"base_url,omitempty" jsonschema:"model server URL (builtin agent; same as model_server)"`
	ModelServer  string   `json:"model_server,omitempty" jsonschema:"send model traffic to this server: a URL or a [model_servers] name of the config"`
	MaxTurns     int64    `json:"max_turns,omitempty" jsonschema:"turn limit per attempt (builtin agent)"`
	ContextWin   int64    `json:"context_window,omitempty" jsonschema:"model context window in tokens (builtin agent)"`
	Temperature  *float64 `json:"temperature,omitempty" jsonschema:"sampling temperature (builtin agent)"`
	MaxTokens    *int64   `json:"max_tokens,omitempty" jsonschema:"end the run when its model use reaches this many tokens (0 = no limit)"`
	MaxCost      *float64 `json:"max_cost,omitempty" jsonschema:"end the run when its estimated model cost reaches this many US dollars (0 = no limit)"`
	ReadOnly     []string `json:"ro,omitempty" jsonschema:"host paths made visible read-only inside the sandbox"`
	Labels       []string `json:"labels,omitempty" jsonschema:"labels as KEY=VALUE: a team server hands the run only to an agent host that has all of them"`
	Author       string   `json:"author,omitempty" jsonschema:"author and committer of the result commit, as NAME <EMAIL> (default: the configured author, else the repository's user.name and user.email)"`
	Wait         bool     `json:"wait,omitempty" jsonschema:"wait for the run to end, sending progress notifications as its journal grows; the result is then the ended run (its status says how it ended); cancelling the call stops the waiting, not the run"`
}

// argv is submit's command line; the task goes on stdin.
func (in SubmitInput) argv() []string {
	a := command("submit").
		str("repo", in.Repo).str("subdir", in.Subdir).str("base", in.Base).str("agent", in.Agent).str("agent-cmd", in.AgentCmd).
		num("attempts", in.Attempts).str("timeout", in.Timeout).str("sandbox", in.Sandbox).
		strs("env", in.Env).on("include-dirty", in.IncludeDirty).str("network", in.Network).
		strs("allow", in.Allow).on("loopback-tcp", in.LoopbackTCP).
		num("max-files", in.MaxFiles).num("max-bytes", in.MaxBytes).str("disk", in.Disk).num("disk-inodes", in.DiskInodes).
		num("max-parallel", in.MaxParallel).str("model", in.Model).str("provider", in.Provider).
		str("base-url", in.BaseURL).str("model-server", in.ModelServer).num("max-turns", in.MaxTurns).
		num("context-window", in.ContextWin).ptrFloat("temperature", in.Temperature).
		ptrInt("max-tokens", in.MaxTokens).ptrFloat("max-cost", in.MaxCost).strs("ro", in.ReadOnly).strs("label", in.Labels).
		str("author", in.Author)
	for _, c := range in.Checks {
		a.strs("check", []string{c.Name + "=" + c.Command})
	}
	return a.args("-")
}

// IDInput names one run.
type IDInput struct {
	ID string `json:"id" jsonschema:"the run id, or a unique prefix of at least 3 characters"`
}

// ListInput filters list.
type ListInput struct {
	Status  []string `json:"status,omitempty" jsonschema:"only runs in these states (queued, preparing, running, checking, exporting, succeeded, failed, cancelled, interrupted)"`
	Repo    string   `json:"repo,omitempty" jsonschema:"only runs of the repository containing this directory"`
	Agent   string   `json:"agent,omitempty" jsonschema:"only runs of this agent"`
	Verdict string   `json:"verdict,omitempty" jsonschema:"only runs with this verdict: accept, reject or none"`
	Since   string   `json:"since,omitempty" jsonschema:"only runs created after this duration ago (like 2h) or date"`
	Limit   int64    `json:"limit,omitempty" jsonschema:"at most this many runs, the newest"`
}

func (in ListInput) argv() []string {
	return command("list").strs("status", in.Status).str("repo", in.Repo).str("agent", in.Agent).
		str("verdict", in.Verdict).str("since", in.Since).num("limit", in.Limit).args()
}

// ResultInput asks for a run's result.
type ResultInput struct {
	ID    string `json:"id" jsonschema:"the run id, or a unique prefix of at least 3 characters"`
	Patch bool   `json:"patch,omitempty" jsonschema:"also return the patch text"`
}

func (in ResultInput) argv() []string {
	return command("result").on("patch", in.Patch).args(in.ID)
}

// CancelInput cancels a run.
type CancelInput struct {
	ID     string `json:"id" jsonschema:"the run id, or a unique prefix of at least 3 characters"`
	NoWait bool   `json:"no_wait,omitempty" jsonschema:"return once the cancel is requested, without waiting for the run to end"`
}

func (in CancelInput) argv() []string {
	return command("cancel").on("no-wait", in.NoWait).args(in.ID)
}

// ResumeInput continues an interrupted or failed run.
type ResumeInput struct {
	ID          string   `json:"id" jsonschema:"the run id, or a unique prefix of at least 3 characters"`
	Task        string   `json:"task,omitempty" jsonschema:"additional instructions for the next attempt"`
	MaxParallel int64    `json:"max_parallel,omitempty" jsonschema:"runs at once on this machine"`
	MaxTokens   *int64   `json:"max_tokens,omitempty" jsonschema:"the run's new token budget (all attempts; 0 = no limit)"`
	MaxCost     *float64 `json:"max_cost,omitempty" jsonschema:"the run's new cost budget in US dollars (all attempts; 0 = no limit)"`
	Wait        bool     `json:"wait,omitempty" jsonschema:"wait for the run to end, sending progress notifications as its journal grows"`
}

func (in ResumeInput) argv() []string {
	return command("resume").str("task", in.Task).num("max-parallel", in.MaxParallel).
		ptrInt("max-tokens", in.MaxTokens).ptrFloat("max-cost", in.MaxCost).args(in.ID)
}

// VerdictInput records a reviewer's verdict.
type VerdictInput struct {
	ID      string `json:"id" jsonschema:"the run id, or a unique prefix of at least 3 characters"`
	Verdict string `json:"verdict" jsonschema:"accept or reject"`
	Note    string `json:"note,omitempty" jsonschema:"a note for the record (why)"`
}

func (in VerdictInput) argv() []string {
	return command("verdict").str("note", in.Note).args(in.ID, in.Verdict)
}

// Cursor says how far a follower has read: the journal up to event Seq,
// the output of attempt Attempt up to byte Offset of its log.
type Cursor struct {
	Seq     int64 `json:"seq" jsonschema:"the last journal event read (its seq)"`
	Attempt int64 `json:"attempt" jsonschema:"the attempt whose output is being read"`
	Offset  int64 `json:"offset" jsonschema:"the byte offset in that attempt's log read up to"`
}

// LogsInput reads a run's logs, whole or what is new since a cursor.
type LogsInput struct {
	ID      string  `json:"id" jsonschema:"the run id, or a unique prefix of at least 3 characters"`
	Attempt int64   `json:"attempt,omitempty" jsonschema:"only attempt N (with follow: start at attempt N)"`
	Check   string  `json:"check,omitempty" jsonschema:"the output of this check instead of the agent's"`
	Events  bool    `json:"events,omitempty" jsonschema:"the event journal instead of output (with follow: only the journal)"`
	Follow  bool    `json:"follow,omitempty" jsonschema:"return only what is new: the journal events after cursor.seq and the output after cursor.offset, with the cursor to pass next time; done says the run has ended and all of it was read"`
	Cursor  *Cursor `json:"cursor,omitempty" jsonschema:"where the previous follow answer ended (implies follow)"`
	WaitSec int64   `json:"wait_seconds,omitempty" jsonschema:"with follow: wait up to this many seconds (at most 60) for something new before answering"`
}

// following reports whether the logs call reads from a cursor.
func (in LogsInput) following() bool { return in.Follow || in.Cursor != nil }

func (in LogsInput) argv() []string {
	return command("logs").num("attempt", in.Attempt).str("check", in.Check).on("events", in.Events).args(in.ID)
}

// tailArgv is the hidden command that reads what is new since cursor c.
func (in LogsInput) tailArgv(c Cursor, wait string) []string {
	if c.Attempt == 0 {
		c.Attempt = in.Attempt
	}
	return command("mcp", "tail").num("seq", c.Seq).num("attempt", c.Attempt).num("offset", c.Offset).
		str("check", in.Check).on("events-only", in.Events).str("wait", wait).args(in.ID)
}
