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

	"github.com/agentrun/agentrun/internal/layout"
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
	// Lock is the run's supervisor.lock, already held (TakeLock). Spawn
	// hands it to the child and closes the caller's copy.
	Lock *os.File
	// Environ is the supervisor's own environment; default: a minimal one
	// built from the caller's (PATH, HOME, USER, LANG, TMPDIR, XDG_*).
	Environ []string
}

// TakeLock takes the run's supervisor.lock for a supervisor about to be
// spawned. It waits up to wait for a holder to let go (a Reconcile
// probing it); a live supervisor still holding it is an error.
func TakeLock(l layout.Layout, id string, wait time.Duration) (*os.File, error) {
	f, err := openLock(l.SupervisorLock(id))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, ErrSupervised
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ErrSupervised means a live supervisor holds the run.
var ErrSupervised = errors.New("a live supervisor holds the run")

// Spawn starts the detached supervisor (new session; it survives the CLI
// and the terminal) and returns its pid. The child's stdout and stderr go
// to the run's supervisor.log.
func Spawn(ctx context.Context, o SpawnOptions) (int, error) {
	if o.Lock == nil {
		return 0, errors.New("spawn supervisor: lock not held")
	}
	defer o.Lock.Close()
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return 0, fmt.Errorf("spawn supervisor: %w", err)
		}
	}
	payload, err := json.Marshal(o.Handoff)
	if err != nil {
		return 0, fmt.Errorf("spawn supervisor: %w", err)
	}
	if len(payload) > maxHandoff {
		return 0, fmt.Errorf("spawn supervisor: environment values too large (%d bytes)", len(payload))
	}
	logf, err := os.OpenFile(o.Layout.SupervisorLog(o.ID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("spawn supervisor: %w", err)
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
	cmd.ExtraFiles = []*os.File{o.Lock, pr} // fd 3: supervisor.lock (held), fd 4: handoff
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = o.Environ
	if cmd.Env == nil {
		cmd.Env = supervisorEnviron()
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

// supervisorEnviron is the supervisor's environment: enough to find
// programs and the user's git identity, nothing secret. Secrets the run
// needs come through the Handoff.
func supervisorEnviron() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR",
		"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
