package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// setupStep is the run's setup layer: what the repository's setup command
// (Record.Setup) changed in a checkout of the base commit, kept in the
// layer cache and put under the run's workspace.
//
// Run finds the layer of the run's key (base commit, command, setup
// allowlist, backend and image) in the cache, or makes it: the command
// runs once, in a sandbox of its own with the run's limits, its own HOME
// and only the setup allowlist for network (through an egress proxy of its
// own; none without one). With Lower (the run's checkout layer: its
// workspace is an overlay) the setup's workspace is an overlay on that
// layer, and the layer is the overlay's upper directory: the checkout is
// never written. Without, the setup runs in a checkout of its own made by
// Copy, and the layer is that whole tree. What the setup leaves in its
// HOME (module and package caches) is kept beside it, shown read-only to
// the runs. A run waits while another makes the same layer, and finds it
// made. A setup that fails, times out or cannot start is a catalog
// SetupFailed error (its output in the setup log), and nothing is cached.
//
// Run journals setup events: "started" when it makes the layer, "cached"
// when it found it, "done" (and "failed") with how long it took.
type setupStep struct {
	Record *run.Run
	Layout layout.Layout
	Cache  *workspace.LayerCache
	// Backend runs the setup's sandbox.
	Backend sandbox.Backend
	// Lower is the run's checkout layer ("" : the workspace is a copy).
	Lower string
	// Copy makes the checkout a setup runs in when there is no Lower.
	Copy workspace.Provider
	// StateDir is the run's workspace state directory, which records the
	// layer it uses.
	StateDir string
	// Env is added to the setup's environment (setupToolchainEnv).
	Env []string
	// ReadOnly are further host paths the setup sees read-only.
	ReadOnly   []string
	StartProxy func(ctx context.Context, r *run.Run, socket string, getenv func(string) string, onRecord func(egress.Record)) (stop func(context.Context) error, err error)
	// Getenv gives the proxy variables the setup's egress goes out by.
	Getenv func(string) string
	Event  func(run.Event)
}

// Run implements the step; see setupStep.
func (s *setupStep) Run(ctx context.Context) (workspace.SetupLayer, error) {
	r := s.Record
	in := workspace.SetupInput{Repo: r.Repo, Commit: r.Base, Command: r.Setup.Command, Allow: r.Setup.Allow,
		Backend: r.Sandbox.Backend, Image: r.Sandbox.Image}
	key := workspace.SetupKey(in)
	t0 := time.Now()
	l, err := s.Cache.AcquireSetup(ctx, in, s.StateDir, func(ctx context.Context, b workspace.SetupBuild) (string, error) {
		s.Event(run.NewEvent(run.EventSetup, "setup started: "+r.Setup.Command, map[string]any{"kind": "started", "key": key,
			"command": r.Setup.Command, "allow": r.Setup.Allow}))
		return s.build(ctx, b)
	})
	took := time.Since(t0)
	if err != nil {
		data := map[string]any{"kind": "failed", "key": key, "duration": took.String(), "log": filepath.Base(s.Layout.SetupLog(r.ID))}
		s.Event(run.NewEvent(run.EventSetup, "setup failed: "+err.Error(), data))
		if _, ok := catalog.As(err); !ok && ctx.Err() == nil {
			err = catalog.SetupFailed.Wrap(err, "%v", err)
		}
		return l, err
	}
	kind, msg := "done", fmt.Sprintf("setup done in %s: layer %s", took.Round(time.Millisecond), key)
	if !l.Made {
		kind, msg = "cached", fmt.Sprintf("setup cached: layer %s, made by an earlier run in %s", key, l.Info.Duration)
	}
	s.Event(run.NewEvent(run.EventSetup, msg, map[string]any{"kind": kind, "key": key, "duration": took.String(),
		"bytes": l.Info.Bytes, "mode": l.Info.Mode}))
	return l, nil
}

// build runs the setup command into b (a workspace.SetupBuilder).
func (s *setupStep) build(ctx context.Context, b workspace.SetupBuild) (string, error) {
	r := s.Record
	if s.Backend == nil {
		return "", fmt.Errorf("sandbox backend %q is not available in this build", r.Sandbox.Backend)
	}
	spec := sandbox.Spec{
		RunID: r.ID + "-setup", Workspace: b.Tree, Home: b.Home, StateDir: s.Layout.SetupState(r.ID),
		Env: append(baseEnv(b.Home), s.Env...), Network: sandbox.NetworkNone, LoopbackTCP: r.Sandbox.LoopbackTCP,
		ReadOnlyPaths: append(append([]string{}, r.Sandbox.ReadOnlyPaths...), s.ReadOnly...),
		Limits:        sandbox.Limits(r.Sandbox.Limits), Image: r.Sandbox.Image, Repo: r.Repo,
	}
	defer os.RemoveAll(spec.StateDir)
	mode := workspace.SetupOverlay
	if s.Lower != "" {
		spec.Layers = &sandbox.Layers{Lower: s.Lower, Upper: b.Tree, Work: b.Scratch}
	} else {
		mode = workspace.SetupCopy
		if s.Copy == nil {
			return "", errMissing("the workspace provider")
		}
		if err := os.Remove(b.Tree); err != nil {
			return "", err
		}
		if _, err := s.Copy.Create(ctx, r.Repo, r.Base, b.Tree, filepath.Join(b.Scratch, "state")); err != nil {
			return "", fmt.Errorf("setup workspace: %w", err)
		}
	}
	if len(r.Setup.Allow) > 0 {
		stop, err := s.proxy(ctx, &spec)
		if err != nil {
			return "", err
		}
		defer stop()
	}
	logf, err := os.OpenFile(s.Layout.SetupLog(r.ID), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", fmt.Errorf("setup log: %w", err)
	}
	defer logf.Close()
	sb, err := s.Backend.Start(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("start the setup's sandbox: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sb.Destroy(dctx)
	}()
	er, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: r.Setup.Command, Cwd: sb.WorkDir()}, logf, logf)
	switch {
	case ctx.Err() != nil:
		return "", context.Cause(ctx)
	case runner.IsCode(err, runner.CodeExec):
		fmt.Fprintf(logf, "agentrun: the setup command could not be started: %v\n", err)
		return "", catalog.SetupFailed.Wrap(err, "the setup command could not be started: %v", err)
	case err != nil:
		return "", fmt.Errorf("setup: %w", err)
	case er.TimedOut || er.ExitCode != 0:
		return "", catalog.SetupFailed.New("%q exited with status %d; its output is in the setup log (agentrun logs --setup %s)", r.Setup.Command, er.ExitCode, r.ID)
	}
	return mode, nil
}

// proxy starts the setup's egress proxy, with the setup allowlist, and
// points spec at it.
func (s *setupStep) proxy(ctx context.Context, spec *sandbox.Spec) (stop func(), err error) {
	if s.StartProxy == nil {
		return nil, errMissing("the egress proxy")
	}
	r := *s.Record
	r.Sandbox.Allow = r.Setup.Allow
	sock, clean, err := socketPath(s.Layout, r.ID, "setup-egress.sock")
	if err != nil {
		return nil, fmt.Errorf("setup egress socket: %w", err)
	}
	stopProxy, err := s.StartProxy(ctx, &r, sock, s.Getenv, func(rec egress.Record) {
		s.Event(run.NewEvent(run.EventEgress, "", rec))
	})
	if err != nil {
		clean()
		return nil, fmt.Errorf("start the setup's egress proxy: %w", err)
	}
	spec.Network, spec.ProxySocket = sandbox.NetworkAllowlist, sock
	spec.Forwards, _ = egress.HostLoopback(r.Setup.Allow)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopProxy(sctx)
		clean()
	}, nil
}

// setupApplied marks, in the workspace state directory, a copy workspace
// that the setup layer was copied into (a resumed run does not copy it
// again over the agent's changes).
const setupApplied = "setup-applied"

// applySetup copies layer l into the copy workspace dir once.
func applySetup(ctx context.Context, l workspace.SetupLayer, dir, stateDir string) error {
	mark := filepath.Join(stateDir, setupApplied)
	if _, err := os.Lstat(mark); err == nil {
		return nil
	}
	if err := workspace.ApplySetup(ctx, l, dir); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// isSetupFailure reports an error of the setup step that the run ends
// setup_failed for.
func isSetupFailure(err error) bool {
	return catalog.SetupFailed.Is(err) && !errors.Is(err, context.Canceled)
}

// setup finds or makes the run's setup layer (setupStep) and puts it
// under the workspace of sb: stacked over the checkout layer of an
// overlay, or copied into a copy workspace once it is complete. The runs
// see what the setup left in its HOME read-only, with the variables that
// point the toolchains at it.
func (s *Supervisor) setup(ctx context.Context, r *run.Run, ws *workspaceStep, sb *sandboxStep) error {
	st := &setupStep{Record: r, Layout: s.Layout, Cache: s.Layers, Backend: sb.Backend, Copy: s.Workspaces,
		StateDir: ws.StateDir, Env: setupToolchainEnv(r.Sandbox.Toolchains), ReadOnly: sb.ReadOnly, StartProxy: s.StartEgress, Getenv: s.getenv, Event: s.event}
	if s.Layers == nil {
		return errMissing("the layer cache")
	}
	if sb.Layers != nil {
		st.Lower = sb.Layers.Lower
	}
	t0 := time.Now()
	l, err := st.Run(ctx)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	s.later(func(r *run.Run) {
		if r.Setup != nil {
			r.Setup.Layer, r.Setup.Cached, r.Setup.Duration = l.Key, !l.Made, run.Duration(took)
		}
	})
	switch {
	case sb.Layers != nil && l.Info.Mode == workspace.SetupOverlay:
		sb.Layers.Above = []string{l.Tree()}
	case sb.Layers != nil:
		// A whole tree (made where no overlay could be): it replaces
		// the checkout under the run's changes.
		sb.Layers.Lower = l.Tree()
	default:
		ready, dir := sb.Ready, ws.Dir
		sb.Ready = func() (time.Duration, error) {
			d, err := ready()
			if err == nil {
				err = applySetup(ctx, l, dir, ws.StateDir)
			}
			return d, err
		}
	}
	env, ro := setupEnv(l)
	sb.Env, sb.ReadOnly = append(env, sb.Env...), append(sb.ReadOnly, ro...)
	return nil
}

// setupEnv is what a run on setup layer l sees of what the setup left in
// its HOME: the directory, read-only, named by AGENTRUN_SETUP_HOME, and
// Go's module cache when the setup filled one (GOFLAGS=-mod=mod: modules
// resolve from it).
func setupEnv(l workspace.SetupLayer) (env, readOnly []string) {
	home := l.Home()
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return nil, nil
	}
	env = []string{"AGENTRUN_SETUP_HOME=" + home}
	if fi, err := os.Stat(filepath.Join(home, "go", "pkg", "mod")); err == nil && fi.IsDir() {
		env = append(env, "GOMODCACHE="+filepath.Join(home, "go", "pkg", "mod"), "GOFLAGS=-mod=mod")
	}
	return env, []string{home}
}
