package runner

import (
	"context"
	"errors"
	"io"
	"time"
)

// Client is the contract every sandbox serves: the supervisor and the
// built-in agent loop see only this. Paths are relative to the workspace
// root or absolute inside the sandbox's view; every op refuses to act
// outside what the sandbox allows.
//
// Errors: an op the program inside can act on (file not found, not unique,
// too large, is a symlink) is returned as *OpError with a Code; any other
// error means the runner or its transport failed.
type Client interface {
	// Exec runs a command. Stdout and stderr are streamed to the writers
	// (nil discards) as they arrive, up to OutputCap bytes each: a longer
	// stream keeps its first half of OutputCap as it comes and, when the
	// command ends, a cut note (CutNote) and its last half. The result
	// also carries the captured tail. On return, timeout or ctx cancellation
	// the command's whole process group (background children included) is
	// killed: SIGTERM, then SIGKILL after KillGrace.
	Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (*ExecResult, error)
	ReadFile(ctx context.Context, req ReadFileRequest) (*ReadFileResult, error)
	WriteFile(ctx context.Context, req WriteFileRequest) (*WriteFileResult, error)
	EditFile(ctx context.Context, req EditFileRequest) (*EditFileResult, error)
	ListDir(ctx context.Context, req ListDirRequest) (*ListDirResult, error)
	Grep(ctx context.Context, req GrepRequest) (*GrepResult, error)
	Stat(ctx context.Context, req StatRequest) (*StatResult, error)
	// Close releases the client. It does not stop the sandbox. Idempotent.
	Close() error
}

// ExecRequest runs either Argv or Shell (via sh -c), never both.
type ExecRequest struct {
	Argv      []string      `json:"argv,omitempty"`
	Shell     string        `json:"shell,omitempty"`
	Cwd       string        `json:"cwd,omitempty"` // default: workspace root
	Env       []string      `json:"env,omitempty"` // added to the sandbox's base environment
	Stdin     []byte        `json:"stdin,omitempty"`
	Timeout   time.Duration `json:"timeout,omitempty"`    // 0: none
	OutputCap int64         `json:"output_cap,omitempty"` // per stream; 0: DefaultOutputCap
	KillGrace time.Duration `json:"kill_grace,omitempty"` // 0: DefaultKillGrace
}

const (
	DefaultOutputCap = 16 << 20
	DefaultKillGrace = 5 * time.Second
	DefaultReadCap   = 1 << 20
	DefaultWriteCap  = 16 << 20
)

type ExecResult struct {
	ExitCode  int           `json:"exit_code"` // -1 if killed by a signal
	Signal    string        `json:"signal,omitempty"`
	TimedOut  bool          `json:"timed_out,omitempty"`
	Cancelled bool          `json:"cancelled,omitempty"`
	Truncated bool          `json:"truncated,omitempty"` // a stream passed OutputCap: its middle was cut (see CutNote)
	Duration  time.Duration `json:"duration"`
	Stdout    []byte        `json:"stdout,omitempty"` // tail, at most 64 KiB
	Stderr    []byte        `json:"stderr,omitempty"`
}

type ReadFileRequest struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit,omitempty"` // 0: up to MaxBytes
	// MaxBytes refuses files larger than this (0: DefaultReadCap) unless a
	// Limit is given.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}
type ReadFileResult struct {
	Data []byte `json:"data"`
	Size int64  `json:"size"` // whole file size
	EOF  bool   `json:"eof"`
}

type WriteFileRequest struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
	Mode uint32 `json:"mode,omitempty"` // default 0644
}
type WriteFileResult struct {
	Created bool  `json:"created"`
	Size    int64 `json:"size"`
}

type EditFileRequest struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}
type EditFileResult struct {
	Size int64 `json:"size"`
}

type ListDirRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	Limit     int    `json:"limit,omitempty"` // 0: 1000
}
type DirEntry struct {
	Name    string    `json:"name"` // relative to the listed path
	Type    string    `json:"type"` // file | dir | symlink | other
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}
type ListDirResult struct {
	Entries   []DirEntry `json:"entries"`
	Truncated bool       `json:"truncated,omitempty"`
}

type GrepRequest struct {
	Pattern    string `json:"pattern"` // Go regexp
	Path       string `json:"path,omitempty"`
	Glob       string `json:"glob,omitempty"` // on the base name or relative path
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	Limit      int    `json:"limit,omitempty"` // max matches; 0: 200
}
type GrepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}
type GrepResult struct {
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated,omitempty"`
}

type StatRequest struct {
	Path string `json:"path"`
}
type StatResult struct {
	Exists  bool      `json:"exists"`
	Type    string    `json:"type,omitempty"`
	Size    int64     `json:"size,omitempty"`
	Mode    uint32    `json:"mode,omitempty"`
	ModTime time.Time `json:"mod_time,omitempty"`
}

// OpError codes: things the caller (or the model) can act on.
const (
	CodeNotFound    = "not_found"
	CodeIsDir       = "is_dir"
	CodeNotDir      = "not_dir"
	CodeTooLarge    = "too_large"
	CodeNotRegular  = "not_regular"
	CodeSymlink     = "symlink"
	CodeEscape      = "escape" // path leaves the allowed area
	CodeNoMatch     = "no_match"
	CodeNotUnique   = "not_unique"
	CodeBadRequest  = "bad_request"
	CodePermission  = "permission"
	CodeInterrupted = "interrupted" // the runner restarted while this ran; it was not re-run
	CodeExec        = "exec"        // the command could not be started
)

// OpError is an error the caller can act on.
type OpError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *OpError) Error() string { return e.Code + ": " + e.Message }

// IsCode reports whether err is an *OpError with the code.
func IsCode(err error, code string) bool {
	var oe *OpError
	return errors.As(err, &oe) && oe.Code == code
}
