package supervisor

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// stopGrace bounds a sandbox's polite stop before it is killed.
const stopGrace = 50 * time.Millisecond

// sandboxStep is the run's sandbox, where the agent and the checks run, on
// the run's workspace directory.
//
// Start starts the sandbox on the workspace directory (which may still be
// being filled), with network only through ProxySocket (none without one)
// and the model gateway bridged from GatewaySocket, then waits for Ready:
// it returns once the sandbox runs on a complete workspace, and journals
// "sandbox started" with what the sandbox enforces. A backend that did not
// bridge the gateway it was given is an error. Stop ends every process in
// the sandbox (the backend's Stop) and journals "sandbox stopped"; it is
// safe twice and before Start, and runs after a Start that failed half
// way. settle destroys the stopped sandbox (what the backend made; never
// the workspace) once the run has ended: what the backend tears down
// then (for the native sandbox, pid 1's exit, whose unmount of the
// overlays syncs the file system under them, with all the agent wrote)
// no longer holds up the export and the run's end, nor makes their
// fsyncs wait behind it.
type sandboxStep struct {
	// Record (the run record) gives the sandbox settings (backend, limits, paths).
	Record *run.Run
	Layout layout.Layout
	// Backend starts the sandbox (nil: the run's backend is not in this
	// build).
	Backend sandbox.Backend
	// Layers give the workspace as an overlay (nil: its directory).
	Layers *sandbox.Layers
	// WorkspaceMode is how the workspace was made, recorded beside what
	// the sandbox enforces under "workspace" ("" records nothing).
	WorkspaceMode string
	ProxySocket   string
	GatewaySocket string
	// Ready waits for the workspace to be complete and says how long
	// making it took (nil: it is complete).
	Ready func() (time.Duration, error)
	// Env is added to the sandbox's base environment (the first of a
	// name wins), and ReadOnly to the record's read-only paths: what the
	// setup layer and the toolchain caches show the run.
	Env      []string
	ReadOnly []string
	Event    func(run.Event)

	sb        sandbox.Sandbox
	enforced  map[string]string
	stopped   bool
	destroyed bool
}

// Start implements resource.
func (s *sandboxStep) Start(ctx context.Context) error {
	r, l := s.Record, s.Layout
	wsDir, err := filepath.Abs(l.Workspace(r.ID))
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	home := l.SandboxHome(r.ID)
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		return fmt.Errorf("sandbox home: %w", err)
	}
	spec := sandbox.Spec{
		RunID:         r.ID,
		Workspace:     wsDir,
		Home:          home,
		StateDir:      l.SandboxState(r.ID),
		Env:           firstOfName(append(baseEnv(home), s.Env...)),
		Network:       sandbox.NetworkNone,
		LoopbackTCP:   r.Sandbox.LoopbackTCP,
		ReadOnlyPaths: append(append([]string{}, r.Sandbox.ReadOnlyPaths...), s.ReadOnly...),
		Limits:        sandbox.Limits(r.Sandbox.Limits),
		Image:         r.Sandbox.Image,
		Repo:          r.Repo,
		GatewaySocket: s.GatewaySocket,
		Layers:        s.Layers,
	}
	if s.ProxySocket != "" {
		spec.Network, spec.ProxySocket = sandbox.NetworkAllowlist, s.ProxySocket
		spec.Forwards, _ = egress.HostLoopback(r.Sandbox.Allow)
	}
	if s.Backend == nil {
		return fmt.Errorf("sandbox backend %q is not available in this build", r.Sandbox.Backend)
	}
	// No Preflight here: submit ran it, and Start fails with the same
	// catalog error if the machine changed since.
	t1 := time.Now()
	sb, err := s.Backend.Start(ctx, spec)
	if err != nil {
		return err
	}
	s.sb = sb
	startTime := time.Since(t1)
	var wsTime time.Duration
	if s.Ready != nil {
		if wsTime, err = s.Ready(); err != nil {
			return err
		}
	}
	name := s.Backend.Name()
	s.enforced = sb.Enforced()
	if s.WorkspaceMode != "" {
		s.enforced = maps.Clone(s.enforced)
		if s.enforced == nil {
			s.enforced = map[string]string{}
		}
		s.enforced["workspace"] = s.WorkspaceMode
	}
	s.Event(run.NewEvent(run.EventSandbox, "sandbox started ("+name+")", map[string]any{"backend": name,
		"enforced": s.enforced, "network": spec.Network, "workspace_time": wsTime.String(), "start_time": startTime.String()}))
	if s.GatewaySocket != "" && sb.GatewayAddr() == "" {
		return fmt.Errorf("the %s sandbox did not bridge the model gateway", name)
	}
	return nil
}

// Stop implements resource.
func (s *sandboxStep) Stop(ctx context.Context) {
	if s.sb == nil || s.stopped {
		return
	}
	s.stopped = true
	// The agent's and the checks' process groups are already gone (Exec
	// returns only after killing them): what is left is the backend's
	// own, so the grace for a polite stop is short.
	sctx, cancel := context.WithTimeout(ctx, stopGrace)
	err := s.sb.Stop(sctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: stop sandbox: %v\n", s.Record.ID, err)
	}
	s.Event(run.NewEvent(run.EventSandbox, "sandbox stopped", nil))
}

// settle implements settler: it destroys the stopped sandbox.
func (s *sandboxStep) settle(ctx context.Context) {
	if s.sb == nil || !s.stopped || s.destroyed {
		return
	}
	s.destroyed = true
	if err := s.sb.Destroy(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: destroy sandbox: %v\n", s.Record.ID, err)
	}
}

// Sandbox is the running sandbox (nil before Start).
func (s *sandboxStep) Sandbox() sandbox.Sandbox { return s.sb }

// Enforced is what the sandbox enforces, as the "sandbox started" event
// said (nil before then).
func (s *sandboxStep) Enforced() map[string]string { return s.enforced }

// baseEnv is the complete base environment inside the sandbox: nothing of
// the supervisor's own environment except PATH.
func baseEnv(home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + filepath.Join(home, "tmp")}
}

// firstOfName keeps the first KEY=VALUE of each name.
func firstOfName(env []string) []string {
	seen := map[string]bool{}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !seen[k] {
			seen[k] = true
			out = append(out, kv)
		}
	}
	return out
}
