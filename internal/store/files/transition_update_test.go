package files_test

import (
	"errors"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

// TestTransitionUpdate: the state change and fn's changes land in one
// write; fn never runs when the compare-and-set fails, and an error from
// fn changes nothing, not even the journal.
func TestTransitionUpdate(t *testing.T) {
	s := openStore(t)
	r := storetest.FullRun(run.NewID())
	r.State, r.StartedAt = run.StateQueued, nil
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Get(ctx, r.ID)
	got, err := s.TransitionUpdate(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, "go",
		func(c *run.Run) error { c.MaxAttempts = 42; c.State = run.StateFailed; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.State != run.StatePreparing || got.MaxAttempts != 42 || got.StartedAt == nil || got.Version != before.Version+1 {
		t.Fatalf("state %s attempts %d started %v version %d (was %d)", got.State, got.MaxAttempts, got.StartedAt, got.Version, before.Version)
	}
	called := false
	_, err = s.TransitionUpdate(ctx, r.ID, []run.State{run.StateQueued}, run.StateRunning, run.ReasonNone, "",
		func(c *run.Run) error { called = true; return nil })
	if !errors.Is(err, run.ErrConflict) || called {
		t.Fatalf("lost compare-and-set: err %v, fn called %v", err, called)
	}
	evs, _ := s.Events(ctx, r.ID, 0)
	boom := errors.New("boom")
	if _, err := s.TransitionUpdate(ctx, r.ID, []run.State{run.StatePreparing}, run.StateRunning, run.ReasonNone, "",
		func(c *run.Run) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want fn's", err)
	}
	now, _ := s.Get(ctx, r.ID)
	after, _ := s.Events(ctx, r.ID, 0)
	if now.State != run.StatePreparing || now.Version != got.Version || len(after) != len(evs) {
		t.Fatalf("a failed fn changed the run: %s v%d, %d events (was %d)", now.State, now.Version, len(after), len(evs))
	}
}
