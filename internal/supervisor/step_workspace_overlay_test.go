package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// nativeProbe is the native sandbox's layer probe, where it mounts
// overlays here.
func nativeProbe(t *testing.T) func(context.Context, string) error {
	t.Helper()
	b := native.New(native.Options{Executable: testsupport.Agentrun(t)})
	lm, ok := b.(sandbox.LayerMounter)
	if !ok {
		testsupport.Require(t, "the native sandbox", false, "the native backend mounts no layers on this system")
	}
	err := lm.ProbeLayers(context.Background(), t.TempDir())
	testsupport.Require(t, "overlay workspaces", err == nil, "%v", err)
	return lm.ProbeLayers
}

func overlayStep(t *testing.T, r *run.Run, dir, state, cache string, probe func(context.Context, string) error) (*workspaceStep, *journal) {
	s, j := newWorkspaceStep(r, dir, state, workspace.NewCheckout())
	c := workspace.NewLayerCache(cache)
	t.Cleanup(c.Wait) // before the temp directories go
	s.Overlay, s.Probe = workspace.NewOverlay(c), probe
	return s, j
}

// TestWorkspaceStepOverlay: with a sandbox that mounts layers, the
// workspace is an overlay, made within Start (its directory the empty
// upper layer), and opened as one again on resume.
func TestWorkspaceStepOverlay(t *testing.T) {
	probe := nativeProbe(t)
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	ctx := context.Background()
	dir, state, cache := l.Workspace(r.ID), l.WorkspaceState(r.ID), l.LayerCache()
	s, j := overlayStep(t, r, dir, state, cache, probe)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	s.Stop(ctx)
	if s.Mode() != "overlay" || s.Layers() == nil || s.Layers().Upper != dir || s.done != nil || j.len() != 0 {
		t.Fatalf("mode %q, layers %+v, filled %v, events %+v", s.Mode(), s.Layers(), s.done != nil, j.evs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the upper layer of a new workspace holds %v", ents)
	}
	if b, err := os.ReadFile(filepath.Join(s.Layers().Lower, "a.txt")); err != nil || string(b) != "a\n" {
		t.Fatalf("lower a.txt: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Attempts = []run.Attempt{{N: 1}}
	again, _ := overlayStep(t, r, dir, state, cache, probe)
	if err := again.Start(ctx); err != nil {
		t.Fatal(err)
	}
	again.Stop(ctx)
	cs, err := again.Workspace().Scan(ctx, workspace.Limits{})
	if err != nil || !again.Resumed() || again.Mode() != "overlay" || len(cs.Changes) != 1 || cs.Changes[0].Path != "b.txt" {
		t.Fatalf("reopened: resumed %v, mode %q, %+v, %v", again.Resumed(), again.Mode(), cs, err)
	}
	// A sandbox that cannot mount it cannot go on with it.
	r.Attempts = nil
	noMount, _ := overlayStep(t, r, dir, state, cache, nil)
	if err := noMount.Start(ctx); err == nil || !strings.Contains(err.Error(), "cannot mount this run's overlay") {
		t.Fatalf("reopened without a mount: %v", err)
	}
}

// TestWorkspaceStepOverlayFallsBack: with a sandbox that cannot mount
// layers here, the workspace is the plain copy, and both the mode and a
// warning say why; a backend that mounts none gets the copy without one.
func TestWorkspaceStepOverlayFallsBack(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	none, j := overlayStep(t, r, l.Workspace(r.ID), l.WorkspaceState(r.ID), l.LayerCache(), nil)
	if err := none.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := none.Wait(); err != nil {
		t.Fatal(err)
	}
	none.Stop(context.Background())
	if none.Mode() != "copy: the host sandbox mounts no overlay" || j.len() != 0 {
		t.Fatalf("mode %q, events %+v", none.Mode(), j.evs)
	}
	r, l = stepRun(t, repo, base)
	refuse := func(context.Context, string) error { return errors.New("no overlay on this file system") }
	s, j := overlayStep(t, r, l.Workspace(r.ID), l.WorkspaceState(r.ID), l.LayerCache(), refuse)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	s.Stop(context.Background())
	if !strings.HasPrefix(s.Mode(), "copy: ") || s.Layers() != nil {
		t.Fatalf("mode %q, layers %+v", s.Mode(), s.Layers())
	}
	if _, err := os.Stat(filepath.Join(l.Workspace(r.ID), "a.txt")); err != nil {
		t.Fatal(err)
	}
	w := j.of(run.EventWarning)
	if len(w) != 1 || !strings.Contains(w[0].Message, "full copy") || !strings.Contains(string(w[0].Data), `"workspace":"copy: `) {
		t.Fatalf("warnings %+v", w)
	}
}

// TestWorkspaceStepOverlayHalfMade: a workspace directory left empty
// while an overlay was being made is made again, as an overlay.
func TestWorkspaceStepOverlayHalfMade(t *testing.T) {
	probe := nativeProbe(t)
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	dir, state := l.Workspace(r.ID), l.WorkspaceState(r.ID)
	for _, d := range []string{dir, filepath.Join(state, "overlay-work")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := overlayStep(t, r, dir, state, l.LayerCache(), probe)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Stop(context.Background())
	if s.Mode() != "overlay" || s.Layers() == nil || s.Resumed() {
		t.Fatalf("mode %q, resumed %v", s.Mode(), s.Resumed())
	}
}

// TestWorkspaceStepRemovedByGC: a run whose workspace gc removed is not
// given a fresh one.
func TestWorkspaceStepRemovedByGC(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	r.Attempts = []run.Attempt{{N: 1}}
	if err := os.MkdirAll(l.RunDir(r.ID), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.WorkspaceRemoved(r.ID), []byte("now\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := newWorkspaceStep(r, l.Workspace(r.ID), l.WorkspaceState(r.ID), workspace.NewCheckout())
	s.Removed = l.WorkspaceRemoved(r.ID)
	err := s.Start(context.Background())
	s.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "agentrun gc removed") {
		t.Fatalf("Start: %v", err)
	}
	if _, err := os.Stat(l.Workspace(r.ID)); !os.IsNotExist(err) {
		t.Fatalf("a workspace was made: %v", err)
	}
}

// TestWorkspaceStepMode: a run that asked for a copy gets one (no probe,
// no layer, no warning) even where an overlay could be mounted; one that
// asked for an overlay fails where it cannot be had instead of falling
// back to a copy.
func TestWorkspaceStepMode(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	probed := 0
	mounts := func(context.Context, string) error { probed++; return nil }
	r, l := stepRun(t, repo, base)
	r.Workspace.Mode = run.WorkspaceCopy
	s, j := overlayStep(t, r, l.Workspace(r.ID), l.WorkspaceState(r.ID), l.LayerCache(), mounts)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	s.Stop(context.Background())
	if s.Mode() != "copy: asked for (workspace copy)" || s.Layers() != nil || probed != 0 || j.len() != 0 {
		t.Fatalf("mode %q, layers %+v, probed %d, events %+v", s.Mode(), s.Layers(), probed, j.evs)
	}
	if ents, _ := os.ReadDir(l.LayerCache()); len(ents) != 0 {
		t.Fatalf("a copy used the layer cache: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(l.Workspace(r.ID), "a.txt")); err != nil {
		t.Fatal(err)
	}
	for _, probe := range []func(context.Context, string) error{nil, func(context.Context, string) error { return errors.New("no overlay here") }} {
		r, l = stepRun(t, repo, base)
		r.Workspace.Mode = run.WorkspaceOverlay
		s, _ = overlayStep(t, r, l.Workspace(r.ID), l.WorkspaceState(r.ID), l.LayerCache(), probe)
		err := s.Start(context.Background())
		if err == nil {
			_, err = s.Wait()
		}
		s.Stop(context.Background())
		if err == nil || !strings.Contains(err.Error(), "an overlay was asked for") {
			t.Fatalf("overlay asked for, probe %v: %v", probe != nil, err)
		}
		if _, err := os.Stat(filepath.Join(l.Workspace(r.ID), "a.txt")); err == nil {
			t.Fatal("a copy was made where an overlay was asked for")
		}
	}
}
