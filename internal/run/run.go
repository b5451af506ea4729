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
	ReasonInternal         Reason = "internal_error"
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

	Agent       AgentSpec     `json:"agent"`
	Checks      []CheckSpec   `json:"checks,omitempty"`
	MaxAttempts int           `json:"max_attempts"`
	Timeout     Duration      `json:"timeout,omitempty"` // whole run; 0 = none
	Sandbox     SandboxConfig `json:"sandbox"`
	Export      ExportConfig  `json:"export"`

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
}

// AgentSpec says which agent runs and how.
type AgentSpec struct {
	Name    string   `json:"name"`              // profile name, "command" for --agent-cmd, "builtin"
	Command string   `json:"command,omitempty"` // shell command run via sh -c inside the sandbox
	Env     []string `json:"env,omitempty"`     // NAMES of host variables passed through (values never stored)
	Hosts   []string `json:"hosts,omitempty"`   // hosts the agent needs (egress allowlist)

	// Built-in loop settings.
	Model         string   `json:"model,omitempty"`
	Provider      string   `json:"provider,omitempty"`
	BaseURL       string   `json:"base_url,omitempty"`
	MaxTurns      int      `json:"max_turns,omitempty"`
	ContextWindow int      `json:"context_window,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
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
}

// Limits are resource limits for everything in the sandbox. Zero means the
// backend default.
type Limits struct {
	MemoryBytes   int64   `json:"memory_bytes,omitempty"`
	Pids          int64   `json:"pids,omitempty"`
	CPUs          float64 `json:"cpus,omitempty"`
	FileSizeBytes int64   `json:"file_size_bytes,omitempty"`
	OpenFiles     int64   `json:"open_files,omitempty"`
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

// Usage counts model tokens (built-in agent).
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens,omitempty"`
	Turns            int   `json:"turns,omitempty"`
}

// Verdict is a reviewer's judgement of a finished run.
type Verdict struct {
	Value string    `json:"value"` // accept | reject
	Note  string    `json:"note,omitempty"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
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
