package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func TestStatusHuman(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.Verdict = &run.Verdict{Value: "accept", By: "reviewer", Note: "looks right", At: time.Now()}
		r.Subdir, r.Warnings = "svc/api", []string{"the base commit has submodules (lib): their directories are empty"}
	})
	app, out, _ := h.app()
	if err := runStatus(context.Background(), &statusOptions{ID: r.ID[:5], Now: time.Now()}, app); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"status    succeeded", "Fix the flaky auth tests", "command: make fix",
		"host (no isolation)", "10m ago", "took 3m0s", r.Branch, "1 file, +2 -0", "1 entries",
		"1200 prompt, 300 completion, 4 turns", "accept by reviewer", "looks right", "2 of 3",
		"#1 1m0s checks_failed (agent exit 0)", "FAIL  unit  exit 1, 3s", "pass  unit  exit 0, 2s",
		"sha256:abc", "enforced     network", "unavailable  memory (no cgroup)", "devbox",
		"/src/project (the agent and the checks start in svc/api)", "warning   the base commit has submodules (lib)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("status lacks %q:\n%s", want, s)
		}
	}
}

func TestStatusJSONIsTheRecord(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	code, out, _ := h.exec("status", r.ID, "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got run.Run
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.State != run.StateSucceeded || len(got.Attempts) != 2 || got.Provenance.PolicyDigest != "sha256:abc" {
		t.Errorf("%+v", got)
	}
}

func TestStatusBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "status")
}

func TestStatusArgs(t *testing.T) {
	h := newTestHome(t)
	code, out, _ := h.exec("status", "--json")
	if code != 2 || jsonErr(t, out)["code"] != "usage" {
		t.Errorf("no id: exit %d %s", code, out)
	}
}

// A run left active by a supervisor that died is shown, and recorded, as
// interrupted; one whose supervisor lives stays as it is.
func TestStatusReconcilesDeadSupervisor(t *testing.T) {
	h := newTestHome(t)
	old := time.Now().Add(-time.Hour)
	dead := h.add(func(r *run.Run) {
		r.State, r.Reason, r.CreatedAt = run.StateRunning, "", old
		r.Attempts = []run.Attempt{{N: 1, StartedAt: old}}
	})
	live := h.add(func(r *run.Run) {
		r.State, r.Reason, r.CreatedAt = run.StateRunning, "", old
		r.Attempts = []run.Attempt{{N: 1, StartedAt: old}}
	})
	h.holdSupervisor(live.ID)
	code, out, stderr := h.exec("status", dead.ID)
	if code != 0 || !strings.Contains(out, "status    interrupted: the supervisor stopped") {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
	if r, _ := h.st.Get(context.Background(), dead.ID); r.State != run.StateInterrupted {
		t.Errorf("stored state %s, want interrupted", r.State)
	}
	code, out, _ = h.exec("status", live.ID)
	if code != 0 || !strings.Contains(out, "running") || strings.Contains(out, "interrupted") {
		t.Errorf("live run: exit %d\n%s", code, out)
	}
	code, out, _ = h.exec("list", "--status", "interrupted", "--json")
	var doc listOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatal(err)
	}
	if len(doc.Runs) != 1 || doc.Runs[0].ID != dead.ID {
		t.Errorf("list --status interrupted: %+v", doc.Runs)
	}
}

func TestActiveTimeSkipsTheGapBeforeAResume(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(min int, s run.State) run.Event {
		return run.Event{Type: run.EventState, State: s, Time: t0.Add(time.Duration(min) * time.Minute)}
	}
	evs := []run.Event{ev(0, run.StateQueued), ev(1, run.StatePreparing), ev(2, run.StateRunning), ev(11, run.StateFailed),
		ev(600, run.StateQueued), ev(600, run.StatePreparing), ev(605, run.StateSucceeded)}
	got, resumes := activeTime(evs, t0.Add(700*time.Minute))
	if got != 15*time.Minute || resumes != 1 {
		t.Fatalf("%s, %d resumes", got, resumes)
	}
}

// status says what the run asked of its workspace: full history and the
// included files; a run with the defaults has no workspace line.
func TestStatusWorkspaceLine(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.Workspace = run.WorkspaceSpec{Mode: run.WorkspaceCopy, History: run.HistoryFull}
		r.Provenance.Included = []run.IncludedFile{{Path: ".env", Size: 2048, SHA256: strings.Repeat("a", 64), Mode: "100644"}}
	})
	plain := h.addFinished(nil)
	app, out, _ := h.app()
	if err := runStatus(context.Background(), &statusOptions{ID: r.ID, Now: time.Now()}, app); err != nil {
		t.Fatal(err)
	}
	want := "workspace  copy asked for; full history (the repository's objects, read-only); 1 ignored file included (2.0 KiB, never exported)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out)
	}
	out.Reset()
	if err := runStatus(context.Background(), &statusOptions{ID: plain.ID, Now: time.Now()}, app); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\nworkspace ") {
		t.Errorf("a default run has a workspace line:\n%s", out)
	}
}
