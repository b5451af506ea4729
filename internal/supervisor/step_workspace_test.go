package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

func newWorkspaceStep(r *run.Run, dir, state string, p workspace.Provider) (*workspaceStep, *journal) {
	j := &journal{}
	return &workspaceStep{Provider: p, Record: r, Dir: dir, StateDir: state, Event: j.add}, j
}

// TestWorkspaceStep: Start makes the directory at once and fills it in the
// background; Wait returns once the base commit's files are there; Stop is
// safe twice and leaves the workspace as it is.
func TestWorkspaceStep(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n", "src/b.go": "package b\n"})
	r, l := stepRun(t, repo, base)
	ctx := context.Background()
	dir := l.Workspace(r.ID)
	s, j := newWorkspaceStep(r, dir, l.WorkspaceState(r.ID), workspace.NewCheckout())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("no workspace directory after Start: %v", err)
	}
	took, err := s.Wait()
	if err != nil || took <= 0 {
		t.Fatalf("Wait: %v after %v", err, took)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "src", "b.go")); err != nil || string(b) != "package b\n" {
		t.Fatalf("src/b.go: %q %v", b, err)
	}
	if s.Workspace() == nil || s.Workspace().Dir() != dir || s.Resumed() {
		t.Fatalf("workspace %v resumed %v", s.Workspace(), s.Resumed())
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Stop(ctx)
	s.Stop(ctx)
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err != nil {
		t.Fatalf("Stop touched the workspace: %v", err)
	}
	cs, err := s.Workspace().Scan(ctx, workspace.Limits{})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Path != "new.txt" {
		t.Fatalf("scan after Stop: %+v %v", cs, err)
	}
	if j.len() != 0 {
		t.Fatalf("events %+v", j.evs)
	}
}

func TestWorkspaceStepStopWithoutStart(t *testing.T) {
	s := &workspaceStep{}
	s.Stop(context.Background())
	s.Stop(context.Background())
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceStepReopens: a workspace an attempt has had is opened as it
// is (resume), with the agent's changes.
func TestWorkspaceStepReopens(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	ws := startWorkspace(t, r, l)
	if err := os.WriteFile(filepath.Join(ws.Dir(), "a.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Attempts = []run.Attempt{{N: 1}}
	s, j := newWorkspaceStep(r, l.Workspace(r.ID), l.WorkspaceState(r.ID), workspace.NewCheckout())
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if !s.Resumed() || s.done != nil {
		t.Fatalf("resumed %v, filled %v", s.Resumed(), s.done != nil)
	}
	cs, err := s.Workspace().Scan(context.Background(), workspace.Limits{})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Path != "a.txt" {
		t.Fatalf("scan: %+v %v", cs, err)
	}
	if j.len() != 0 {
		t.Fatalf("events %+v", j.evs)
	}
}

// TestWorkspaceStepHalfMade: a directory without a manifest that no agent
// had is made again, with a warning; one that an attempt had is an error,
// and left as it is.
func TestWorkspaceStepHalfMade(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	for _, attempted := range []bool{false, true} {
		r, l := stepRun(t, repo, base)
		dir := l.Workspace(r.ID)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "half.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if attempted {
			r.Attempts = []run.Attempt{{N: 1}}
		}
		s, j := newWorkspaceStep(r, dir, l.WorkspaceState(r.ID), workspace.NewCheckout())
		err := s.Start(context.Background())
		if err == nil {
			_, err = s.Wait()
		}
		s.Stop(context.Background())
		_, halfErr := os.Stat(filepath.Join(dir, "half.txt"))
		if attempted {
			if err == nil || !strings.Contains(err.Error(), "workspace") || halfErr != nil || j.len() != 0 {
				t.Fatalf("attempted: err %v, half.txt %v, events %+v", err, halfErr, j.evs)
			}
			continue
		}
		if err != nil || halfErr == nil {
			t.Fatalf("err %v, half.txt kept: %v", err, halfErr == nil)
		}
		if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
			t.Fatal(err)
		}
		w := j.of(run.EventWarning)
		if len(w) != 1 || w[0].Message != "the workspace was left half made; making it again" {
			t.Fatalf("warnings %+v", w)
		}
	}
}

// createOnly is the checkout provider without its Filler capability.
type createOnly struct{ workspace.Provider }

// TestWorkspaceStepCreates: a provider that cannot fill an existing
// directory makes the workspace within Start.
func TestWorkspaceStepCreates(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	s, _ := newWorkspaceStep(r, l.Workspace(r.ID), l.WorkspaceState(r.ID), createOnly{workspace.NewCheckout()})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if s.done != nil || s.Workspace() == nil {
		t.Fatalf("filled %v, workspace %v", s.done != nil, s.Workspace())
	}
	if _, err := os.Stat(filepath.Join(l.Workspace(r.ID), "a.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestWorkspaceStepNoProvider(t *testing.T) {
	r, l := stepRun(t, t.TempDir(), "")
	s, _ := newWorkspaceStep(r, l.Workspace(r.ID), l.WorkspaceState(r.ID), nil)
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "workspace provider") {
		t.Fatalf("err %v", err)
	}
	s.Stop(context.Background())
}

// TestWorkspaceStepCachedCopy: where there is no overlay, a run's copy
// comes from the layer cache (the commit's layer is made, and a second
// run copies it), except for a run that asked for a copy by name, which
// leaves the cache alone.
func TestWorkspaceStepCachedCopy(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n", "src/b.go": "package b\n"})
	cacheDir := t.TempDir()
	layers := workspace.NewLayerCache(cacheDir)
	t.Cleanup(layers.Wait)
	for _, c := range []struct {
		mode      string
		wantLayer bool
	}{{run.WorkspaceCopy, false}, {"", true}, {run.WorkspaceAuto, true}} {
		r, l := stepRun(t, repo, base)
		r.Workspace.Mode = c.mode
		dir := l.Workspace(r.ID)
		s, _ := newWorkspaceStep(r, dir, l.WorkspaceState(r.ID), workspace.NewCheckout())
		s.Cached = workspace.NewLayerCopy(layers)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "src", "b.go")); err != nil || string(b) != "package b\n" {
			t.Fatalf("mode %q: src/b.go: %q %v", c.mode, b, err)
		}
		if !strings.HasPrefix(s.Mode(), "copy") {
			t.Fatalf("mode %q: workspace %q", c.mode, s.Mode())
		}
		ents, _ := os.ReadDir(cacheDir)
		if hasLayer := len(ents) > 0; hasLayer != c.wantLayer {
			t.Fatalf("mode %q: the layer cache holds %v", c.mode, ents)
		}
		s.Stop(context.Background())
	}
}
