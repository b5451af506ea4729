package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// Status is how a bench run came out.
type Status string

const (
	// StatusPassed: the acceptance passed on the result.
	StatusPassed Status = "passed"
	// StatusFailed: the agent produced nothing, or a result the
	// acceptance (or an expect hash) refuses.
	StatusFailed Status = "failed"
	// StatusGamed: the result changed an acceptance file.
	StatusGamed Status = "gamed"
	// StatusError: the run or its scoring could not be done (a sandbox
	// that would not start, a cancelled run, ...): it says nothing about
	// the agent.
	StatusError Status = "error"
)

// FormatVersion is the version of the results format; a reader refuses
// a newer one.
const FormatVersion = 1

// Line types of a results file.
const (
	TypeHeader = "header"
	TypeRun    = "run"
)

// Header is a results file's first line: the bench's settings.
type Header struct {
	Type            string        `json:"type"` // "header"
	Version         int           `json:"version"`
	Bench           string        `json:"bench"` // the bench's id
	StartedAt       time.Time     `json:"started_at"`
	AgentrunVersion string        `json:"agentrun_version"`
	Host            string        `json:"host"`
	Sandbox         string        `json:"sandbox"`
	Repeat          int           `json:"repeat"`
	Parallel        int           `json:"parallel"`
	Timeout         string        `json:"timeout,omitempty"`
	Attempts        int           `json:"attempts,omitempty"`
	Agents          []Agent       `json:"agents"`
	Fixtures        []FixtureInfo `json:"fixtures"`
}

// FixtureInfo names a fixture of the bench.
type FixtureInfo struct {
	Name     string `json:"name"`
	Language string `json:"language,omitempty"`
	Source   string `json:"source"`
	Digest   string `json:"digest"`
}

// Agent is one agent/model of the bench.
type Agent struct {
	Agent string `json:"agent"` // profile name, "builtin" or "command"
	// Command is the --agent-cmd command (agent "command").
	Command     string `json:"command,omitempty"`
	Model       string `json:"model,omitempty"`
	ModelServer string `json:"model_server,omitempty"`
}

// Label is how tables name the agent: "builtin/qwen3-coder", "claude".
func (a Agent) Label() string {
	if a.Model == "" {
		return a.Agent
	}
	return a.Agent + "/" + a.Model
}

// Result is one run of the bench: a results file's other lines.
type Result struct {
	Type    string `json:"type"` // "run"
	Fixture string `json:"fixture"`
	Agent
	Repeat  int    `json:"repeat"` // 1-based
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
	// ErrorCode is the catalog code of an error (status error).
	ErrorCode string     `json:"error_code,omitempty"`
	RunID     string     `json:"run_id,omitempty"`
	RunStatus run.State  `json:"run_status,omitempty"`
	RunReason run.Reason `json:"run_reason,omitempty"`
	Branch    string     `json:"branch,omitempty"`
	Commit    string     `json:"commit,omitempty"`
	Attempts  int        `json:"attempts"`
	Turns     int        `json:"turns"`
	Tokens    Tokens     `json:"tokens"`
	CostUSD   float64    `json:"cost_usd"`
	// WallMS is the run's time from its start to its end (queueing
	// excluded); QueueMS the time it waited for a slot; ScoreMS the
	// scoring's.
	WallMS   int64    `json:"wall_ms"`
	QueueMS  int64    `json:"queue_ms"`
	ScoreMS  int64    `json:"score_ms"`
	Overhead Overhead `json:"overhead"`
	Harness  Harness  `json:"harness"`
	// Gamed are the acceptance files the result changed; Unexpected the
	// expect paths not as expected.
	Gamed      []string `json:"gamed_files,omitempty"`
	Unexpected []string `json:"unexpected_files,omitempty"`
	Accept     *Accept  `json:"accept,omitempty"`
}

// Key is the result's agent and fixture.
func (r Result) Key() string { return r.Label() + " " + r.Fixture }

// Tokens are a run's model tokens.
type Tokens struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Cached     int64 `json:"cached,omitempty"`
	Total      int64 `json:"total"`
}

// Overhead is what the sandbox and the export cost a run, from its
// journal: making the workspace, starting the sandbox, scanning the
// workspace for changes, exporting them.
type Overhead struct {
	WorkspaceMS    int64 `json:"workspace_ms"`
	SandboxStartMS int64 `json:"sandbox_start_ms"`
	ScanMS         int64 `json:"scan_ms"`
	ExportMS       int64 `json:"export_ms"`
}

// Harness counts what the agent's harness had to do or gave up on: the
// built-in agent's nudges (from its transcripts) and the attempts that
// ended for want of progress or limits.
type Harness struct {
	Nudges           int `json:"nudges,omitempty"`
	Stalled          int `json:"stalled,omitempty"`
	Stuck            int `json:"stuck,omitempty"`
	MaxTurns         int `json:"max_turns,omitempty"`
	ContextExhausted int `json:"context_exhausted,omitempty"`
	ModelError       int `json:"model_error,omitempty"`
	Timeout          int `json:"timeout,omitempty"`
}

// Add adds o to h.
func (h *Harness) Add(o Harness) {
	h.Nudges += o.Nudges
	h.Stalled += o.Stalled
	h.Stuck += o.Stuck
	h.MaxTurns += o.MaxTurns
	h.ContextExhausted += o.ContextExhausted
	h.ModelError += o.ModelError
	h.Timeout += o.Timeout
}

// Failures is the number of attempts the harness ended early.
func (h Harness) Failures() int {
	return h.Stalled + h.Stuck + h.MaxTurns + h.ContextExhausted + h.ModelError + h.Timeout
}

// Writer appends the lines of a results file, one whole line a write, so
// a bench stopped half way leaves the runs it finished.
type Writer struct {
	mu sync.Mutex
	f  *os.File
}

// Create makes the results file path (replacing one that is there) and
// writes its header.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f}
	h.Type, h.Version = TypeHeader, FormatVersion
	if err := w.line(h); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Add appends one run.
func (w *Writer) Add(r Result) error {
	r.Type = TypeRun
	return w.line(r)
}

func (w *Writer) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// Close syncs and closes the file.
func (w *Writer) Close() error {
	return errors.Join(w.f.Sync(), w.f.Close())
}

// ReadFile reads a results file: its header and its runs. A last line cut
// short (a bench killed while writing it) is left out; any other damage
// is a catalog.BadResults error.
func ReadFile(path string) (Header, []Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, catalog.BadResults.Wrap(err, "%v", err)
	}
	defer f.Close()
	h, rs, err := Read(f)
	if err != nil {
		return Header{}, nil, catalog.BadResults.Wrap(err, "%s: %v", path, err)
	}
	return h, rs, nil
}

// Read is ReadFile of r (its errors are not catalog errors).
func Read(r io.Reader) (Header, []Result, error) {
	br := bufio.NewReader(r)
	var h Header
	var out []Result
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return h, nil, err
		}
		last := errors.Is(err, io.EOF)
		if len(bytes.TrimSpace(line)) == 0 {
			if last {
				break
			}
			continue
		}
		var probe struct {
			Type    string `json:"type"`
			Version int    `json:"version"`
		}
		if jerr := json.Unmarshal(line, &probe); jerr != nil {
			if last && n > 1 {
				break // cut short while it was written
			}
			return h, nil, fmt.Errorf("line %d: %v", n, jerr)
		}
		switch {
		case n == 1 && probe.Type != TypeHeader:
			return h, nil, fmt.Errorf("line 1 is not a bench header")
		case n == 1 && probe.Version > FormatVersion:
			return h, nil, fmt.Errorf("format version %d is newer than this agentrun's (%d)", probe.Version, FormatVersion)
		case n == 1:
			if err := json.Unmarshal(line, &h); err != nil {
				return h, nil, fmt.Errorf("line 1: %v", err)
			}
		case probe.Type == TypeRun:
			var res Result
			if err := json.Unmarshal(line, &res); err != nil {
				return h, nil, fmt.Errorf("line %d: %v", n, err)
			}
			out = append(out, res)
		}
		if last {
			break
		}
	}
	if h.Type == "" {
		return h, nil, errors.New("the file is empty")
	}
	return h, out, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
