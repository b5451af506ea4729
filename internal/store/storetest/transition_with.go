package storetest

import (
	"errors"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

// testTransitionWith: the state change and fn's changes land in one write;
// fn never runs when the compare-and-set fails, and an error from fn
// changes nothing, not even the journal; the state fields are the
// transition's whatever fn sets.
func testTransitionWith(t *testing.T, s run.Store) {
	r := create(t, s, run.NewID(), nil)
	before, err := s.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.TransitionWith(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, "go",
		func(c *run.Run) error { c.MaxAttempts = 42; c.State = run.StateFailed; c.StartedAt = nil; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.State != run.StatePreparing || got.Message != "go" || got.MaxAttempts != 42 || got.StartedAt == nil || got.Version != before.Version+1 {
		t.Fatalf("state %s msg %q attempts %d started %v version %d (was %d)", got.State, got.Message, got.MaxAttempts, got.StartedAt, got.Version, before.Version)
	}
	if stored, _ := s.Get(ctx, r.ID); stored.MaxAttempts != 42 || stored.State != run.StatePreparing {
		t.Fatalf("stored: attempts %d state %s", stored.MaxAttempts, stored.State)
	}
	called := false
	_, err = s.TransitionWith(ctx, r.ID, []run.State{run.StateQueued}, run.StateRunning, run.ReasonNone, "",
		func(c *run.Run) error { called = true; return nil })
	if !errors.Is(err, run.ErrConflict) || called {
		t.Fatalf("lost compare-and-set: err %v, fn called %v", err, called)
	}
	evs, err := s.Events(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := s.TransitionWith(ctx, r.ID, []run.State{run.StatePreparing}, run.StateRunning, run.ReasonNone, "",
		func(c *run.Run) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want fn's", err)
	}
	now, _ := s.Get(ctx, r.ID)
	after, _ := s.Events(ctx, r.ID, 0)
	if now.State != run.StatePreparing || now.Version != got.Version || len(after) != len(evs) {
		t.Fatalf("a failed fn changed the run: %s v%d, %d events (was %d)", now.State, now.Version, len(after), len(evs))
	}
	// A nil fn is a plain Transition.
	if got, err := s.TransitionWith(ctx, r.ID, []run.State{run.StatePreparing}, run.StateSucceeded, run.ReasonCompleted, "", nil); err != nil || got.FinishedAt == nil {
		t.Fatalf("nil fn: %v, finished %v", err, got)
	}
}
