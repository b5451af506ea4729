package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

// newFullHome is a testHome on a small tmpfs (root only; skipped
// otherwise, a failure with AGENTRUN_REQUIRE_CAPS=1), with fill to fill it
// to the last byte with the file at path.
func newFullHome(t *testing.T) (h *testHome, fill func(path string)) {
	t.Helper()
	dir := t.TempDir()
	testsupport.Tmpfs(t, dir, "1m")
	st, err := files.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h = &testHome{t: t, dir: dir, st: st, env: map[string]string{"AGENTRUN_HOME": dir, "HOME": t.TempDir(), "USER": "reviewer"}}
	return h, func(path string) { testsupport.FillDisk(t, path) }
}

// TestDeadRunOnFullDisk: a run whose supervisor died after its workspace
// filled the disk. Its record cannot be marked interrupted, yet cancel
// says it has stopped (not an internal error) and clean removes it, with
// and without --force, freeing the space.
func TestDeadRunOnFullDisk(t *testing.T) {
	for _, force := range []bool{false, true} {
		h, fill := newFullHome(t)
		r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateQueued, "" })
		if _, err := h.st.Transition(context.Background(), r.ID, []run.State{run.StateQueued}, run.StateRunning, "", ""); err != nil {
			t.Fatal(err)
		}
		ws := h.st.L.Workspace(r.ID)
		os.MkdirAll(ws, 0o755)
		fill(filepath.Join(ws, "huge.bin"))

		code, out, errOut := h.exec("cancel", "--json", r.ID)
		var doc struct {
			Status       run.State `json:"status"`
			AlreadyEnded bool      `json:"already_ended"`
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Status != run.StateInterrupted || !doc.AlreadyEnded ||
			!strings.Contains(errOut, "no space left") {
			t.Fatalf("cancel: exit %d %s\nstderr: %s", code, out, errOut)
		}
		args := []string{"clean", "--json", r.ID}
		if force {
			args = append(args, "--force")
		}
		if code, out, errOut := h.exec(args...); code != 0 || exists(h.st.L.RunDir(r.ID)) {
			t.Fatalf("%v: exit %d %s\nstderr: %s", args, code, out, errOut)
		}
		if err := os.WriteFile(filepath.Join(h.dir, "room"), make([]byte, 64<<10), 0o600); err != nil {
			t.Fatalf("no room after clean: %v", err)
		}
	}
}

// TestCleanKeepsARunBeingSpawned: the dead-run rule does not take a run
// that submit has just created (no supervisor lock yet) for a dead one.
func TestCleanKeepsARunBeingSpawned(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateQueued, "" })
	code, out, _ := h.exec("clean", "--json", r.ID)
	if e := jsonErr(t, out); code != 2 || e["code"] != "run_active" || !exists(h.st.L.RunDir(r.ID)) {
		t.Fatalf("exit %d %s", code, out)
	}
}
