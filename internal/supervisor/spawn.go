package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/supervisor/ahead"
)

// Handoff is what the CLI passes to a new supervisor over a pipe, never
// through a file or the command line: the values of the environment
// variables the run may use, and a resume note.
type Handoff struct {
	Env  map[string]string `json:"env,omitempty"`
	Note string            `json:"note,omitempty"` // extra instructions given to resume
	// Ended says how the run ended before it was resumed (its state,
	// reason and message are replaced when it is queued again).
	Ended string `json:"ended,omitempty"`
	// ExportOnly: the run stopped at its export (export_failed, or
	// interrupted after its last attempt passed its checks), and the
	// resume adds no instructions: the new supervisor exports that
	// attempt's work again, without another attempt (exportOnly).
	ExportOnly bool `json:"export_only,omitempty"`
}

// maxHandoff bounds the handoff (a pipe buffer holds 64 KiB).
const maxHandoff = 60 << 10

// SpawnOptions say how to start a supervisor.
type SpawnOptions struct {
	Layout      layout.Layout
	ID          string
	Executable  string // the agentrun binary; default os.Executable()
	MaxParallel int
	Handoff     Handoff
	// Lease is the run's lease, already held; Coord hands it over to the
	// child (coord.Handover), and Spawn releases the caller's copy.
	Lease coord.Lease
	Coord coord.Coordinator
	// Environ is the supervisor's own environment; default: a minimal one
	// built from the caller's (PATH, HOME, USER, LANG, TMPDIR, XDG_*).
	Environ []string
}

// ErrSupervised means a live supervisor holds the run.
var ErrSupervised = coord.ErrHeld

// takeLease takes the run's lease for a supervisor about to be spawned.
// It waits up to wait for a holder to let go (a Reconcile probing it); a
// live supervisor still holding it is ErrSupervised.
func takeLease(ctx context.Context, co coord.Coordinator, id string, wait time.Duration) (coord.Lease, error) {
	return co.Acquire(ctx, id, wait)
}

// Spawn starts the detached supervisor (new session; it survives the CLI
// and the terminal) and returns its pid. The child's stdout and stderr go
// to the run's supervisor.log.
func Spawn(ctx context.Context, o SpawnOptions) (int, error) {
	if o.Lease == nil {
		return 0, errors.New("spawn supervisor: lease not held")
	}
	defer o.Lease.Release()
	exe, err := executable(o.Executable)
	if err != nil {
		return 0, err
	}
	leaseFile, payload, logf, err := handover(o, o.Handoff)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("spawn supervisor: %w", err)
	}
	defer pr.Close()
	defer pw.Close()
	n := o.MaxParallel
	if n < 1 {
		n = 1
	}
	cmd := exec.Command(exe, "__supervise", "--home", o.Layout.Home, "--id", o.ID, "--max-parallel", strconv.Itoa(n))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{leaseFile, pr} // fd 3: the lease (held), fd 4: handoff
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = o.Environ
	if cmd.Env == nil {
		cmd.Env = ahead.Environ()
	}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("spawn supervisor: %w", err)
	}
	pr.Close()
	// The payload fits in the pipe buffer: this never blocks on the child.
	if _, err := pw.Write(payload); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("hand off to supervisor: %w", err)
	}
	pw.Close()
	pid := cmd.Process.Pid
	go cmd.Wait() // reap it if this process outlives it
	return pid, nil
}

// executable is exe, or else this process's own binary.
func executable(exe string) (string, error) {
	if exe != "" {
		return exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("spawn supervisor: %w", err)
	}
	return exe, nil
}

// handover is what a new supervisor of o's run is given: the lease's
// descriptor, msg as JSON (at most maxHandoff bytes), and its log opened.
func handover(o SpawnOptions, msg any) (lease *os.File, payload []byte, logf *os.File, err error) {
	ho, ok := o.Coord.(coord.Handover)
	if !ok {
		return nil, nil, nil, errors.New("spawn supervisor: the coordinator cannot hand a lease to another process")
	}
	if lease, err = ho.File(o.Lease); err != nil {
		return nil, nil, nil, fmt.Errorf("spawn supervisor: %w", err)
	}
	if payload, err = json.Marshal(msg); err != nil {
		return nil, nil, nil, fmt.Errorf("spawn supervisor: %w", err)
	}
	if len(payload) > maxHandoff {
		return nil, nil, nil, fmt.Errorf("spawn supervisor: environment values too large (%d bytes)", len(payload))
	}
	if logf, err = os.OpenFile(o.Layout.SupervisorLog(o.ID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return nil, nil, nil, fmt.Errorf("spawn supervisor: %w", err)
	}
	return lease, payload, logf, nil
}
