package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

func newStore(t *testing.T) (*files.Store, layout.Layout) {
	t.Helper()
	home := t.TempDir()
	st, err := files.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	return st, layout.Layout{Home: home}
}

func createRun(t *testing.T, st run.Store, state run.State, mut func(*run.Run)) *run.Run {
	t.Helper()
	r := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "t"}
	if mut != nil {
		mut(r)
	}
	ctx := context.Background()
	if err := st.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if state != run.StateQueued {
		var err error
		if r, err = st.Transition(ctx, r.ID, []run.State{run.StateQueued}, state, run.ReasonNone, ""); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	st, l := newStore(t)
	t.Run("dead supervisor", func(t *testing.T) {
		r := createRun(t, st, run.StateRunning, nil)
		nr, err := Reconcile(ctx, testHome(st, l), r)
		if err != nil || nr.State != run.StateInterrupted || nr.Reason != run.ReasonInterrupted {
			t.Fatalf("%v %+v", err, nr)
		}
	})
	t.Run("live supervisor", func(t *testing.T) {
		r := createRun(t, st, run.StateRunning, nil)
		lk, err := flock.New(l.Home).Acquire(context.Background(), r.ID, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release()
		nr, err := Reconcile(ctx, testHome(st, l), r)
		if err != nil || nr.State != run.StateRunning {
			t.Fatalf("%v %s", err, nr.State)
		}
		// Another would-be supervisor cannot take it.
		if _, err := flock.New(l.Home).Acquire(context.Background(), r.ID, 20*time.Millisecond); !errors.Is(err, ErrSupervised) {
			t.Fatalf("second lock: %v", err)
		}
		if held, _ := flock.New(l.Home).Held(context.Background(), r.ID); !held {
			t.Fatal("Held says free")
		}
		lk.Release()
		if held, _ := flock.New(l.Home).Held(context.Background(), r.ID); held {
			t.Fatal("Held after release")
		}
		nr, _ = Reconcile(ctx, testHome(st, l), r)
		if nr.State != run.StateInterrupted {
			t.Fatalf("after release: %s", nr.State)
		}
	})
	t.Run("terminal", func(t *testing.T) {
		r := createRun(t, st, run.StateSucceeded, nil)
		nr, err := Reconcile(ctx, testHome(st, l), r)
		if err != nil || nr.State != run.StateSucceeded {
			t.Fatalf("%v %s", err, nr.State)
		}
	})
	t.Run("being spawned", func(t *testing.T) {
		r := createRun(t, st, run.StateQueued, nil)
		nr, _ := Reconcile(ctx, testHome(st, l), r)
		if nr.State != run.StateQueued {
			t.Fatalf("a just-submitted run was marked %s", nr.State)
		}
		old := createRun(t, st, run.StateQueued, func(r *run.Run) { r.CreatedAt = time.Now().Add(-time.Minute) })
		nr, _ = Reconcile(ctx, testHome(st, l), old)
		if nr.State != run.StateInterrupted {
			t.Fatalf("an old orphaned queued run is %s", nr.State)
		}
	})
	t.Run("stale view", func(t *testing.T) {
		r := createRun(t, st, run.StateRunning, nil)
		if _, err := st.Transition(ctx, r.ID, []run.State{run.StateRunning}, run.StateSucceeded, run.ReasonCompleted, ""); err != nil {
			t.Fatal(err)
		}
		nr, err := Reconcile(ctx, testHome(st, l), r) // r still says running
		if err != nil || nr.State != run.StateSucceeded {
			t.Fatalf("%v %s", err, nr.State)
		}
	})
}

func TestCancelQueuedWithoutSupervisor(t *testing.T) {
	ctx := context.Background()
	st, l := newStore(t)
	r := createRun(t, st, run.StateQueued, nil)
	nr, err := Cancel(ctx, testHome(st, l), r.ID)
	if err != nil || nr.State != run.StateCancelled || !nr.CancelRequested {
		t.Fatalf("%v %+v", err, nr)
	}
	evs, _ := st.Events(ctx, r.ID, 0)
	var sawCancel bool
	for _, e := range evs {
		sawCancel = sawCancel || e.Type == run.EventCancel
	}
	if !sawCancel {
		t.Fatal("no cancel event")
	}
	// Idempotent on an ended run.
	nr, err = Cancel(ctx, testHome(st, l), r.ID)
	if err != nil || nr.State != run.StateCancelled {
		t.Fatalf("%v %s", err, nr.State)
	}
}

func TestCommitMessage(t *testing.T) {
	for task, want := range map[string]string{
		"Fix the flaky auth tests":               "Fix the flaky auth tests\n\nAgentrun-Run: abc\n",
		"\n  First line  \nsecond\nthird":        "First line\n\nAgentrun-Run: abc\n",
		"   ":                                    "agentrun abc\n\nAgentrun-Run: abc\n",
		strings.Repeat("x", 300) + "\nmore text": strings.Repeat("x", 200) + "\n\nAgentrun-Run: abc\n",
	} {
		if got := CommitMessage(task, "abc"); got != want {
			t.Errorf("CommitMessage(%q) = %q, want %q", task, got, want)
		}
	}
}

func TestPrompts(t *testing.T) {
	l := layout.Layout{Home: t.TempDir()}
	log := l.CheckLog("id", 1, "unit")
	_ = os.MkdirAll(filepath.Dir(log), 0o755)
	long := strings.Repeat("noise line\n", 1000) + "FAIL: TestX expected 1 got 2\n"
	_ = os.WriteFile(log, []byte(long), 0o644)
	msg := failedChecks(l, "id", 1, []run.CheckResult{{Name: "unit", ExitCode: 1}, {Name: "lint", Passed: true}})
	if !strings.Contains(msg, `Check "unit" failed with exit code 1`) || !strings.Contains(msg, "FAIL: TestX expected 1 got 2") ||
		strings.Contains(msg, "lint") || len(msg) > tailBytes+400 {
		t.Fatalf("failed checks message (%d bytes):\n%s", len(msg), msg)
	}
	if failedChecks(l, "id", 1, []run.CheckResult{{Name: "ok", Passed: true}}) != "" {
		t.Fatal("passing checks produced a failure note")
	}
	p := buildPrompt("the task", msg)
	if !strings.HasPrefix(p, "the task\n\n---\n") {
		t.Fatalf("prompt %q", p[:40])
	}
	if buildPrompt("the task", "") != "the task" {
		t.Fatal("first prompt is not the task")
	}
	r := &run.Run{Attempts: []run.Attempt{{N: 1, Checks: []run.CheckResult{{Name: "unit"}}}}, Message: "resumed"}
	prev := previousEnding(r, true, "failed (checks_failed): checks failed: unit", "also update the docs")
	for _, want := range []string{"resumed", "attempt (1)", "interrupted", "unit", "also update the docs", "failed (checks_failed)"} {
		if !strings.Contains(prev, want) {
			t.Errorf("resume note lacks %q:\n%s", want, prev)
		}
	}
}
