package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// withWorkspace gives r an overlay workspace of repo's base, made where
// the supervisor makes it, with one changed file, and a HOME.
func withWorkspace(t *testing.T, h *testHome, r *run.Run, repo, base string) {
	t.Helper()
	l := h.st.L
	c := workspace.NewLayerCache(l.LayerCache())
	ws, err := workspace.NewOverlay(c).Create(context.Background(), repo, base, l.Workspace(r.ID), l.WorkspaceState(r.ID))
	// A layer syncs in the background under a shared lock, which gc
	// respects: on a loaded machine a gc right after would skip it.
	c.Wait()
	if err != nil {
		t.Fatal(err)
	}
	h.write(filepath.Join(ws.Dir(), "changed.txt"), strings.Repeat("x", 10000))
	h.write(filepath.Join(l.SandboxHome(r.ID), ".cache", "blob"), strings.Repeat("y", 20000))
}

func gcJSON(t *testing.T, h *testHome, args ...string) gcOutput {
	t.Helper()
	code, out, errb := h.exec(append([]string{"gc", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("gc %v: exit %d\n%s%s", args, code, out, errb)
	}
	var g gcOutput
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func gcIDs(g gcOutput) []string {
	var ids []string
	for _, r := range g.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestGCRemovesFinishedWorkspacesAndUnusedLayers(t *testing.T) {
	h := newTestHome(t)
	h.env["AGENTRUN_CACHE_BUDGET"] = "1" // every unused layer goes
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	finishedRun := func(age time.Duration) *run.Run {
		at := time.Now().Add(-age).UTC()
		r := h.add(func(r *run.Run) { r.FinishedAt = &at; r.Repo, r.Base = repo, base })
		withWorkspace(t, h, r, repo, base)
		h.write(h.st.L.Patch(r.ID), "the patch\n")
		return r
	}
	old, recent := finishedRun(48*time.Hour), finishedRun(time.Minute)
	interrupted := h.add(func(r *run.Run) { r.State, r.Reason = run.StateInterrupted, run.ReasonInterrupted })
	withWorkspace(t, h, interrupted, repo, base)
	active := h.add(func(r *run.Run) { r.State, r.Reason = run.StateRunning, "" })
	h.holdSupervisor(active.ID)
	withWorkspace(t, h, active, repo, base)

	// A dry run names what a gc would remove, and removes nothing.
	g := gcJSON(t, h, "--dry-run", "--older-than", "1h")
	if ids := gcIDs(g); len(ids) != 1 || ids[0] != old.ID || !g.DryRun || g.Runs[0].Bytes < 30000 || len(g.Layers) != 0 {
		t.Fatalf("dry run: %+v", g)
	}
	if _, err := os.Stat(h.st.L.Workspace(old.ID)); err != nil {
		t.Fatalf("the dry run removed a workspace: %v", err)
	}
	// --keep 1 keeps the most recently finished one.
	g = gcJSON(t, h, "--keep", "1")
	if ids := gcIDs(g); len(ids) != 1 || ids[0] != old.ID || g.FreedBytes < 30000 {
		t.Fatalf("--keep 1: %+v", g)
	}
	for _, p := range []string{h.st.L.Workspace(old.ID), h.st.L.WorkspaceState(old.ID), h.st.L.SandboxHome(old.ID)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is still there: %v", p, err)
		}
	}
	for _, p := range []string{h.st.L.RunJSON(old.ID), h.st.L.Patch(old.ID), h.st.L.WorkspaceRemoved(old.ID)} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s went: %v", p, err)
		}
	}
	// The layer is still used by the other runs' workspaces.
	if len(g.Layers) != 0 {
		t.Fatalf("a layer in use was removed: %+v", g.Layers)
	}
	g = gcJSON(t, h)
	if ids := gcIDs(g); len(ids) != 1 || ids[0] != recent.ID || len(g.Layers) != 0 {
		t.Fatalf("gc: %+v", g)
	}
	for _, r := range []*run.Run{interrupted, active} {
		if _, err := os.Stat(filepath.Join(h.st.L.Workspace(r.ID), "changed.txt")); err != nil {
			t.Fatalf("the %s run's workspace was touched: %v", r.State, err)
		}
	}
	// With the last workspaces on it gone, the layer is unused: it goes.
	for _, r := range []*run.Run{interrupted, active} {
		for _, p := range []string{h.st.L.Workspace(r.ID), h.st.L.WorkspaceState(r.ID)} {
			if err := workspace.RemoveTree(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g = gcJSON(t, h); len(g.Runs) != 0 || len(g.Layers) != 1 || g.Layers[0].Commit != base || g.CacheBytes != 0 {
		t.Fatalf("gc of the unused layer: %+v", g)
	}
	// status and list say the workspace was removed.
	code, out, _ := h.exec("status", old.ID)
	if code != 0 || !strings.Contains(out, "removed by agentrun gc") {
		t.Fatalf("status:\n%s", out)
	}
	code, out, _ = h.exec("list", "--json")
	if code != 0 || !strings.Contains(out, `"workspace": "removed"`) {
		t.Fatalf("list --json:\n%s", out)
	}
	if g := gcJSON(t, h); len(g.Runs) != 0 || len(g.Layers) != 0 {
		t.Fatalf("a second gc removed %+v", g)
	}
}

func TestGCFlags(t *testing.T) {
	h := newTestHome(t)
	for _, args := range [][]string{{"gc", "--keep", "-1"}, {"gc", "--older-than", "soon"}, {"gc", "extra"}} {
		if code, _, _ := h.exec(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	code, out, _ := h.exec("gc")
	if code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Fatalf("gc of an empty data directory: %d\n%s", code, out)
	}
}

// TestDiskUse: list and status count the run directory without following
// links, the workspace's part apart.
func TestDiskUse(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	ws := h.st.L.Workspace(r.ID)
	h.write(filepath.Join(ws, "big"), strings.Repeat("z", 100000))
	outside := filepath.Join(t.TempDir(), "outside")
	h.write(outside, strings.Repeat("o", 1<<20))
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	code, out, _ := h.exec("list", "--json")
	var l listOutput
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Runs) != 1 || l.Runs[0].Disk == nil {
		t.Fatalf("list --json: %d\n%s", code, out)
	}
	d := l.Runs[0].Disk
	if d.Workspace != "copy" || d.WorkspaceBytes < 100000 || d.WorkspaceBytes > 200000 || d.Bytes <= d.WorkspaceBytes || d.Partial {
		t.Fatalf("disk %+v (a link followed?)", d)
	}
	code, out, _ = h.exec("status", r.ID)
	if code != 0 || !strings.Contains(out, "workspace "+humanBytes(d.WorkspaceBytes)+" (a full copy)") {
		t.Fatalf("status:\n%s", out)
	}
}
