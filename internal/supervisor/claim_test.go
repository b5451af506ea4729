package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// TestClaimedHome: where workers claim runs, Start and Resume spawn
// nothing, a queued run waits for a worker however long, and the resume's
// note reaches the worker through the journal.
func TestClaimedHome(t *testing.T) {
	ctx := context.Background()
	st, l := newStore(t)
	h := testHome(st, l)
	h.Claimed = true

	r := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "t"}
	if err := Start(ctx, h, r, StartOptions{Executable: "/nonexistent"}); err != nil {
		t.Fatalf("Start spawned (or failed): %v", err)
	}
	// Long past the spawn grace, still only waiting for a worker.
	old, err := st.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	old.CreatedAt = time.Now().Add(-time.Hour)
	if nr, err := Reconcile(ctx, h, old); err != nil || nr.State != run.StateQueued {
		t.Fatalf("an unclaimed queued run was reconciled: %v %+v", err, nr)
	}
	if dead, err := Unsupervised(ctx, h, old); err != nil || dead {
		t.Fatalf("Unsupervised of an unclaimed queued run: %v %v", dead, err)
	}
	// Lite counts the same run as dead.
	if nr, _ := Reconcile(ctx, testHome(st, l), old); nr.State != run.StateInterrupted {
		t.Fatalf("Lite left it %s", nr.State)
	}
	old, _ = st.Get(ctx, r.ID)

	if ho, err := ResumeHandoff(ctx, st, r.ID); err != nil || ho.Note != "" {
		t.Fatalf("a run never resumed: %+v %v", ho, err)
	}
	nr, err := Resume(ctx, h, old, "try again", StartOptions{Executable: "/nonexistent"})
	if err != nil || nr.State != run.StateQueued {
		t.Fatalf("Resume: %v %+v", err, nr)
	}
	if held, _ := h.Coord.Held(ctx, r.ID); held {
		t.Fatal("Resume kept the lease")
	}
	ho, err := ResumeHandoff(ctx, st, r.ID)
	if err != nil || ho.Note != "try again" || ho.Ended == "" || ho.Env != nil {
		t.Fatalf("the resume's handoff: %+v %v", ho, err)
	}
	// A supervisor that took the run up and died leaves it interrupted.
	if _, err := st.Update(ctx, r.ID, func(r *run.Run) error { r.Supervisor = &run.SupervisorInfo{PID: 1}; return nil }); err != nil {
		t.Fatal(err)
	}
	cur, _ := st.Get(ctx, r.ID)
	if nr, _ := Reconcile(ctx, h, cur); nr.State != run.StateInterrupted {
		t.Fatalf("a claimed run whose supervisor died is %s", nr.State)
	}
}
