package run

import (
	"errors"
	"time"
)

// State is where a run is in its lifecycle.
type State string

const (
	StateQueued      State = "queued"
	StatePreparing   State = "preparing"
	StateRunning     State = "running"
	StateChecking    State = "checking"
	StateExporting   State = "exporting"
	StateSucceeded   State = "succeeded"
	StateFailed      State = "failed"
	StateCancelled   State = "cancelled"
	StateInterrupted State = "interrupted"
)

// States lists every state in lifecycle order.
var States = []State{StateQueued, StatePreparing, StateRunning, StateChecking, StateExporting,
	StateSucceeded, StateFailed, StateCancelled, StateInterrupted}

// Terminal reports whether no supervisor works on a run in state s.
// interrupted is terminal in that sense: it waits for resume.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateInterrupted:
		return true
	}
	return false
}

// Active reports whether a supervisor should be working on a run in state s.
func (s State) Active() bool { return s != "" && !s.Terminal() }

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}

// Resumable reports whether `agentrun resume` may continue a run in state s.
func (s State) Resumable() bool { return s == StateInterrupted || s == StateFailed }

// Reason says why a run is in its state (most useful for terminal states).
type Reason string

const (
	ReasonNone             Reason = ""
	ReasonCompleted        Reason = "completed"
	ReasonNoChanges        Reason = "no_changes"
	ReasonChecksFailed     Reason = "checks_failed"
	ReasonAgentFailed      Reason = "agent_failed"
	ReasonTimeout          Reason = "timeout"
	ReasonCancelled        Reason = "cancelled"
	ReasonInterrupted      Reason = "interrupted"
	ReasonSandboxError     Reason = "sandbox_error"
	ReasonExportFailed     Reason = "export_failed"
	ReasonModelError       Reason = "model_error"
	ReasonStalled          Reason = "stalled"
	ReasonStuck            Reason = "stuck"
	ReasonMaxTurns         Reason = "max_turns"
	ReasonContextExhausted Reason = "context_exhausted"
	ReasonBudgetExceeded   Reason = "budget_exceeded"
	ReasonDiskExceeded     Reason = "disk_exceeded"
	ReasonSetupFailed      Reason = "setup_failed"
	ReasonInternal         Reason = "internal_error"
	// ReasonHostLost: the agent host executing the run stopped
	// heartbeating; the run was queued again for another host.
	ReasonHostLost Reason = "host_lost"
)

// Run is the record of one task. It is stored as run.json (files store) or a
// row (SQL stores); every field is JSON-serialisable and stable.
type Run struct {
	ID        string    `json:"id"`
	Seq       int64     `json:"seq"` // submission order (monotonic per store); FIFO queue order
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Version increases by one on every stored change (compare-and-set).
	Version int64 `json:"version"`

	State   State  `json:"status"`
	Reason  Reason `json:"reason,omitempty"`
	Message string `json:"message,omitempty"` // human detail for the reason

	Task    string `json:"task"`
	Repo    string `json:"repo"`     // absolute path of the user's repository top level
	BaseRef string `json:"base_ref"` // as given (default HEAD)
	Base    string `json:"base_commit"`
	Branch  string `json:"branch"` // agentrun/<id>
	Commit  string `json:"commit,omitempty"`
	Patch   string `json:"patch,omitempty"` // path of result.patch once exported
	Dirty   bool   `json:"dirty,omitempty"` // repo had uncommitted changes at submit (not included)
	// Subdir is the directory the submit named (its working directory,
	// or --repo), relative to Repo, slash-separated: "" for the top. The
	// agent and the checks start there.
	Subdir string `json:"subdir,omitempty"`
	// Warnings are what the submit warned of as it planned the run (a
	// limit this machine cannot hold, a repository's submodules, ...),
	// as it printed them.
	Warnings []string `json:"warnings,omitempty"`

	Agent       AgentSpec     `json:"agent"`
	Checks      []CheckSpec   `json:"checks,omitempty"`
	MaxAttempts int           `json:"max_attempts"`
	Timeout     Duration      `json:"timeout,omitempty"` // whole run; 0 = none
	Sandbox     SandboxConfig `json:"sandbox"`
	Export      ExportConfig  `json:"export"`
	// Workspace is what the run asked of its workspace (zero: the
	// defaults, auto and shallow, nothing included).
	Workspace WorkspaceSpec `json:"workspace,omitzero"`
	// Gateway is how the agent reaches its model (nil: no model gateway,
	// e.g. an --agent-cmd run with no model configured).
	Gateway *GatewaySpec `json:"gateway,omitempty"`

	// Setup is the repository's setup command, whose result the
	// workspace holds as a layer (nil: none).
	Setup *SetupSpec `json:"setup,omitempty"`

	Attempts []Attempt `json:"attempts,omitempty"`

	// Supervisor is the process working on the run, while one does.
	Supervisor *SupervisorInfo `json:"supervisor,omitempty"`
	// CancelRequested is set by `agentrun cancel` for a run a supervisor owns.
	CancelRequested bool `json:"cancel_requested,omitempty"`

	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`

	Provenance Provenance    `json:"provenance"`
	Result     *ExportResult `json:"result,omitempty"`
	Usage      *Usage        `json:"usage,omitempty"`
	Verdict    *Verdict      `json:"verdict,omitempty"`
	// SubmittedBy is the team server's user who submitted the run (nil:
	// a run submitted on this machine, or before the server had users).
	SubmittedBy *Submitter `json:"submitted_by,omitempty"`
	// Labels steer a team server's run: it is handed only to an agent
	// host that has all of them (--label KEY=VALUE).
	Labels map[string]string `json:"labels,omitempty"`
}

// Submitter is the user who submitted a run to a team server.
type Submitter struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// AgentSpec says which agent runs and how.
type AgentSpec struct {
	Name    string   `json:"name"`              // profile name, "command" for --agent-cmd, "builtin"
	Command string   `json:"command,omitempty"` // shell command run via sh -c inside the sandbox
	Env     []string `json:"env,omitempty"`     // NAMES of host variables passed through (values never stored)
	Hosts   []string `json:"hosts,omitempty"`   // hosts the agent needs (egress allowlist)

	// Binary is the agent CLI's path on the submitting user's PATH (a
	// profile), made visible read-only inside the sandbox. Where the CLI
	// on PATH is an npm launcher that only runs a native program
	// (agent.Native), Binary is that program and Launcher the launcher.
	Binary   string `json:"binary,omitempty"`
	Launcher string `json:"launcher,omitempty"`
	// Helpers are the host paths of programs the CLI runs from PATH
	// (agent.Info.Helpers) that lie outside the system directories: made
	// visible read-only, their directories put first on the agent's PATH.
	Helpers []string `json:"helpers,omitempty"`
	// Session is the agent CLI's own session id, continued by later
	// attempts and by resume (profiles that keep sessions).
	Session string `json:"session,omitempty"`

	// Model settings (Model also for profiles).
	Model         string   `json:"model,omitempty"`
	Provider      string   `json:"provider,omitempty"`
	BaseURL       string   `json:"base_url,omitempty"`
	MaxTurns      int      `json:"max_turns,omitempty"`
	ContextWindow int      `json:"context_window,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
}

// SetupSpec is a run's setup command: run once per base commit, command,
// allowlist and sandbox in a sandbox of its own on the checkout, its
// changes kept as a read-only layer under the run's workspace.
type SetupSpec struct {
	Command string `json:"command"`
	// Source is where the command came from: "flag" (--setup) or
	// ".agentrun.toml" (read from the base commit).
	Source string `json:"source"`
	// Allow is the setup's own egress allowlist (empty: no network).
	Allow []string `json:"allow,omitempty"`
	// Layer is the key of the setup layer the workspace is on, once the
	// run found or made it; Cached: found (made by an earlier run), and
	// Duration how long making or finding it took.
	Layer    string   `json:"layer,omitempty"`
	Cached   bool     `json:"cached,omitempty"`
	Duration Duration `json:"duration,omitempty"`
}

// CheckSpec is one verify check: a named shell command run in the sandbox.
type CheckSpec struct {
	Name    string `json:"name"`
	Command string `json:"command"`
}

// SandboxConfig is what the run asked of its sandbox.
type SandboxConfig struct {
	Backend string   `json:"backend"`
	Network string   `json:"network,omitempty"` // none | allowlist
	Allow   []string `json:"allow,omitempty"`
	// LoopbackTCP lets processes inside connect to servers on the
	// sandbox's own loopback (test suites that start local servers). The
	// network namespace still has only loopback.
	LoopbackTCP bool   `json:"loopback_tcp,omitempty"`
	Limits      Limits `json:"limits"`
	// ReadOnlyPaths are extra host paths bound read-only (e.g. /usr/local/go).
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
	// Image is the image id (sha256:...) the sandbox starts from, with a
	// backend that runs images (docker); resume starts the same one.
	Image string `json:"image,omitempty"`
	// Toolchains are the host's toolchain caches the run reads, read-only.
	Toolchains []ToolchainCache `json:"toolchain_caches,omitempty"`
}

// ToolchainCache is one of the host's toolchain caches shown read-only
// to a run, with the variables that point its toolchain at it.
type ToolchainCache struct {
	Name string   `json:"name"` // go, npm, pip, cargo
	Path string   `json:"path"` // host directory, visible at the same path
	Env  []string `json:"env,omitempty"`
}

// Workspace modes (WorkspaceSpec.Mode): auto uses an overlay where the
// sandbox can mount one and a copy elsewhere; copy never uses the layer
// cache; overlay fails at preflight where it cannot be had.
const (
	WorkspaceAuto    = "auto"
	WorkspaceCopy    = "copy"
	WorkspaceOverlay = "overlay"
)

// History modes (WorkspaceSpec.History): shallow gives the agent only
// the base commit's objects; full also the repository's whole object
// store, read-only.
const (
	HistoryShallow = "shallow"
	HistoryFull    = "full"
)

// WorkspaceSpec is what the run asked of its workspace. Zero fields are
// the defaults.
type WorkspaceSpec struct {
	Mode    string `json:"mode,omitempty"`    // auto (""), copy, overlay
	History string `json:"history,omitempty"` // shallow (""), full
	// Include are the --include patterns: git-ignored paths of the user's
	// working tree copied into the workspace, besides those its
	// .worktreeinclude lists (unless NoInclude).
	Include   []string `json:"include,omitempty"`
	NoInclude bool     `json:"no_include,omitempty"`
	// Objects are the user's object directories the agent sees read-only
	// with full history (they are among Sandbox.ReadOnlyPaths too).
	Objects []string `json:"objects,omitempty"`
}

// ModeOrAuto is Mode, "auto" when unset.
func (w WorkspaceSpec) ModeOrAuto() string {
	if w.Mode == "" {
		return WorkspaceAuto
	}
	return w.Mode
}

// HistoryOrShallow is History, "shallow" when unset.
func (w WorkspaceSpec) HistoryOrShallow() string {
	if w.History == "" {
		return HistoryShallow
	}
	return w.History
}

// IncludedFile is one git-ignored file of the user's working tree copied
// into the workspace on request (.worktreeinclude, --include). It is
// never exported.
type IncludedFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is of the content (of a symlink: its target), in hex.
	SHA256 string `json:"sha256"`
	// Mode is git's: 100644, 100755 (executable) or 120000 (symlink).
	Mode string `json:"mode"`
}

// Limits are resource limits for everything in the sandbox. Zero means the
// backend default.
type Limits struct {
	MemoryBytes   int64   `json:"memory_bytes,omitempty"`
	Pids          int64   `json:"pids,omitempty"`
	CPUs          float64 `json:"cpus,omitempty"`
	FileSizeBytes int64   `json:"file_size_bytes,omitempty"`
	OpenFiles     int64   `json:"open_files,omitempty"`
	// DiskBytes and DiskInodes bound what the sandbox holds in every place
	// the agent can write (workspace, HOME, /tmp, /dev/shm) together.
	DiskBytes  int64 `json:"disk_bytes,omitempty"`
	DiskInodes int64 `json:"disk_inodes,omitempty"`
}

// ExportConfig bounds and signs the export.
type ExportConfig struct {
	MaxFiles    int    `json:"max_files"`
	MaxBytes    int64  `json:"max_bytes"`
	AuthorName  string `json:"author_name,omitempty"`
	AuthorEmail string `json:"author_email,omitempty"`
}

// Attempt is one agent attempt and the checks that followed it.
type Attempt struct {
	N          int           `json:"n"` // 1-based
	Prompt     string        `json:"-"` // stored in attempts/<n>/prompt.txt, not in run.json
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	ExitCode   *int          `json:"exit_code,omitempty"`
	Outcome    Reason        `json:"outcome,omitempty"` // completed, agent_failed, timeout, ...
	Message    string        `json:"message,omitempty"`
	Checks     []CheckResult `json:"checks,omitempty"`
	Resumed    bool          `json:"resumed,omitempty"`
	// Session is the agent CLI's session this attempt started or
	// continued (SessionContinued).
	Session          string `json:"session,omitempty"`
	SessionContinued bool   `json:"session_continued,omitempty"`
	// Usage is this attempt's share of the run's model use.
	Usage *Usage `json:"usage,omitempty"`
}

// GatewaySpec is what the run's model gateway forwards where, and the
// run's budget. It holds no secret: keys are named by source.
type GatewaySpec struct {
	Routes []RouteSpec `json:"routes"`
	// MaxTokens and MaxCost (US dollars) bound the whole run; 0 = none.
	MaxTokens int64   `json:"max_tokens,omitempty"`
	MaxCost   float64 `json:"max_cost,omitempty"`
	// Prices override the built-in price table, by model name.
	Prices map[string]Price `json:"prices,omitempty"`
}

// Route returns the route called name, or nil.
func (g *GatewaySpec) Route(name string) *RouteSpec {
	if g == nil {
		return nil
	}
	for i := range g.Routes {
		if g.Routes[i].Name == name {
			return &g.Routes[i]
		}
	}
	return nil
}

// RouteSpec is one gateway route: a wire protocol family ("anthropic",
// "openai", "gemini") and the upstream it goes to.
type RouteSpec struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Server names the user's model server (a config name or its URL) for
	// shared capacity; "" for a provider's public API.
	Server        string `json:"server,omitempty"`
	MaxConcurrent int    `json:"max_concurrent,omitempty"`
	// Base says URL is the base of an OpenAI-compatible API that is not
	// under /v1 (https://open.bigmodel.cn/api/paas/v4): it takes the
	// place of the /v1 the agent's paths start with. Otherwise URL is a
	// root the agent's paths are appended to.
	Base bool `json:"base,omitempty"`
	// Keys are where the real key may come from, tried in order; none for
	// a model server that needs no key.
	Keys []KeySource `json:"keys,omitempty"`
}

// KeySource is one place a key is read from, on the host, when the
// gateway starts. The value is never stored.
type KeySource struct {
	Env     string `json:"env,omitempty"`     // an environment variable (handed to the supervisor)
	File    string `json:"file,omitempty"`    // a file holding the key
	Command string `json:"command,omitempty"` // a command printing the key (sh -c, on the host)
	// Header carries the key upstream: x-api-key, authorization (Bearer)
	// or x-goog-api-key.
	Header string `json:"header"`
	// Extra headers sent with this kind of credential (e.g. the beta flag
	// an OAuth token needs).
	Extra map[string]string `json:"extra,omitempty"`
}

// Describe names the source for messages.
func (k KeySource) Describe() string {
	switch {
	case k.Env != "":
		return k.Env
	case k.File != "":
		return "key file " + k.File
	case k.Command != "":
		return "key command"
	}
	return "none"
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input" toml:"input"`
	Output float64 `json:"output" toml:"output"`
	// CachedInput is the price of a cache read (default: Input).
	CachedInput *float64 `json:"cached_input,omitempty" toml:"cached_input"`
	// CacheWrite is the price of a cache write (default: 1.25 × Input).
	CacheWrite *float64 `json:"cache_write,omitempty" toml:"cache_write"`
}

// CheckResult is the outcome of one check after one attempt.
type CheckResult struct {
	Name     string   `json:"name"`
	ExitCode int      `json:"exit_code"`
	Passed   bool     `json:"passed"`
	TimedOut bool     `json:"timed_out,omitempty"`
	Duration Duration `json:"duration"`
	Log      string   `json:"log"` // path relative to the run directory
}

// SupervisorInfo identifies the process working on a run.
type SupervisorInfo struct {
	PID       int       `json:"pid"`
	Host      string    `json:"host"`
	StartedAt time.Time `json:"started_at"`
	// ProcStart is the process's start time as the kernel counts it
	// (field 22 of /proc/<pid>/stat, clock ticks since boot; 0 where
	// unknown): with PID it names the process, so that a PID the kernel
	// has since given to another process is never signalled.
	ProcStart uint64 `json:"proc_start,omitempty"`
}

// Provenance says what produced the result.
type Provenance struct {
	Version      string            `json:"agentrun_version"`
	Host         string            `json:"host"`
	Mode         string            `json:"mode"` // lite | full
	Sandbox      string            `json:"sandbox_backend"`
	BaseCommit   string            `json:"base_commit"`
	AgentCommand string            `json:"agent_command"`
	PolicyDigest string            `json:"policy_digest"`      // sha256:<hex> of policy canonical bytes
	Enforced     map[string]string `json:"enforced,omitempty"` // limit/isolation -> "enforced" | "unavailable: why"

	// OrgPolicyDigest is the canonical digest of the organization policy
	// file the run was submitted under (absent: none was in force).
	OrgPolicyDigest string `json:"org_policy_digest,omitempty"`

	// Image is the sandbox's image as the user named it (REF@sha256:...,
	// an id, or a pinned tag), ImageID the engine's id of it and
	// ImageDigests its repository digests (backends that run images).
	Image        string   `json:"image,omitempty"`
	ImageID      string   `json:"image_id,omitempty"`
	ImageDigests []string `json:"image_digests,omitempty"`
	// Included are the git-ignored files copied into the workspace on
	// request, as they were copied.
	Included []IncludedFile `json:"included,omitempty"`
}

// ExportResult is what export produced.
type ExportResult struct {
	Commit       string    `json:"commit"`
	Branch       string    `json:"branch"`
	Patch        string    `json:"patch"`
	FilesChanged int       `json:"files_changed"`
	Insertions   int       `json:"insertions"`
	Deletions    int       `json:"deletions"`
	Diffstat     string    `json:"diffstat,omitempty"`
	Refused      []Refusal `json:"refused,omitempty"`
}

// Refusal is one workspace entry that export would not take, and why.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Usage counts a run's (or an attempt's) model use: every request of every
// agent goes through the model gateway, which meters it. PromptTokens
// include cached ones.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// Turns are the built-in agent's turns.
	Turns int `json:"turns,omitempty"`
	// Requests are the model requests metered.
	Requests int64 `json:"requests,omitempty"`
	// CostUSD is the estimated cost from the price table (models without a
	// price count 0 and are marked Unpriced in Models).
	CostUSD float64               `json:"cost_usd,omitempty"`
	Models  map[string]ModelUsage `json:"models,omitempty"`
}

// ModelUsage is one model's share of a Usage.
type ModelUsage struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CachedTokens     int64   `json:"cached_tokens,omitempty"`
	CacheWriteTokens int64   `json:"cache_write_tokens,omitempty"`
	Requests         int64   `json:"requests"`
	CostUSD          float64 `json:"cost_usd"`
	Unpriced         bool    `json:"unpriced,omitempty"`
}

// Total is prompt plus completion tokens (what --max-tokens bounds).
func (u *Usage) Total() int64 {
	if u == nil {
		return 0
	}
	return u.PromptTokens + u.CompletionTokens
}

// Add adds d to u (models merged).
func (u *Usage) Add(d Usage) {
	u.PromptTokens += d.PromptTokens
	u.CompletionTokens += d.CompletionTokens
	u.CachedTokens += d.CachedTokens
	u.CacheWriteTokens += d.CacheWriteTokens
	u.Turns += d.Turns
	u.Requests += d.Requests
	u.CostUSD += d.CostUSD
	for k, m := range d.Models {
		if u.Models == nil {
			u.Models = map[string]ModelUsage{}
		}
		o := u.Models[k]
		o.PromptTokens += m.PromptTokens
		o.CompletionTokens += m.CompletionTokens
		o.CachedTokens += m.CachedTokens
		o.CacheWriteTokens += m.CacheWriteTokens
		o.Requests += m.Requests
		o.CostUSD += m.CostUSD
		o.Unpriced = o.Unpriced || m.Unpriced
		u.Models[k] = o
	}
}

// Clone is a deep copy of u (nil stays nil).
func (u *Usage) Clone() *Usage {
	if u == nil {
		return nil
	}
	c := *u
	c.Models = nil
	for k, m := range u.Models {
		if c.Models == nil {
			c.Models = map[string]ModelUsage{}
		}
		c.Models[k] = m
	}
	return &c
}

// Verdict is a reviewer's judgement of a finished run.
type Verdict struct {
	Value string    `json:"value"` // accept | reject
	Note  string    `json:"note,omitempty"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
}

// Move is what a transition from state prev to to (see Store) sets in
// r, at now, the same in every store: the state, reason and message,
// StartedAt the first time the run leaves queued for an active state,
// FinishedAt on every terminal state, cleared when a run leaves one.
func (r *Run) Move(prev, to State, reason Reason, msg string, now time.Time) {
	if r.StartedAt == nil && prev == StateQueued && to.Active() && to != StateQueued {
		r.StartedAt = &now
	}
	if to.Terminal() {
		r.FinishedAt = &now
	} else {
		r.FinishedAt = nil
	}
	r.State, r.Reason, r.Message = to, reason, msg
}

// LastAttempt returns the newest attempt, or nil.
func (r *Run) LastAttempt() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}

// Sentinel errors shared by every Store.
var (
	ErrNotFound  = errors.New("run not found")
	ErrAmbiguous = errors.New("run id prefix is ambiguous")
	ErrExists    = errors.New("run already exists")
	ErrConflict  = errors.New("run changed concurrently") // compare-and-set lost
	ErrCorrupt   = errors.New("run record is damaged")
	ErrBadID     = errors.New("invalid run id")
)

// Minus is u less an earlier snapshot b of the same counters (one
// attempt's share of a run's usage); nil when nothing was used.
func (u *Usage) Minus(b *Usage) *Usage {
	if u == nil {
		return nil
	}
	if b == nil {
		b = &Usage{}
	}
	d := &Usage{PromptTokens: u.PromptTokens - b.PromptTokens, CompletionTokens: u.CompletionTokens - b.CompletionTokens,
		CachedTokens: u.CachedTokens - b.CachedTokens, CacheWriteTokens: u.CacheWriteTokens - b.CacheWriteTokens,
		Turns: u.Turns - b.Turns, Requests: u.Requests - b.Requests, CostUSD: u.CostUSD - b.CostUSD}
	for k, m := range u.Models {
		o := b.Models[k]
		dm := ModelUsage{PromptTokens: m.PromptTokens - o.PromptTokens, CompletionTokens: m.CompletionTokens - o.CompletionTokens,
			CachedTokens: m.CachedTokens - o.CachedTokens, CacheWriteTokens: m.CacheWriteTokens - o.CacheWriteTokens,
			Requests: m.Requests - o.Requests, CostUSD: m.CostUSD - o.CostUSD, Unpriced: m.Unpriced}
		if dm.Requests > 0 {
			if d.Models == nil {
				d.Models = map[string]ModelUsage{}
			}
			d.Models[k] = dm
		}
	}
	if d.Requests == 0 && d.Turns == 0 && d.PromptTokens == 0 && d.CompletionTokens == 0 {
		return nil
	}
	return d
}
