package worker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
)

// journalOf is run id's journal as "type message" (a state change: its
// state).
func journalOf(t *testing.T, st run.Store, id string) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type == run.EventState {
			out = append(out, "state "+string(e.State))
		} else {
			out = append(out, fmt.Sprintf("%s %s", e.Type, e.Message))
		}
	}
	return out
}

// TestJournalAheadRidesOnWrites: the local worker's supervisor journals
// without a transaction per event: what it journals is in the journal
// with the next write of the record (before the write's own state
// change), on its own when that write writes nothing (a lost
// compare-and-set), once the batch's time is up, and before a read of
// the journal through it; never out of order.
func TestJournalAheadRidesOnWrites(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		base, err := sqlstore.Open(ctx, newURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { base.Close() })
		r := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "t", Repo: "/r", Base: "b"}
		if err := base.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		st := newJournalAhead(base, r.ID).(*journalAhead)
		st.journal.batch = time.Hour // sent only by a write, a read or drain
		ev := func(m string) {
			if _, err := st.AppendEvent(ctx, r.ID, run.NewEvent(run.EventSandbox, m, nil)); err != nil {
				t.Fatal(err)
			}
		}
		ev("one")
		ev("two")
		if got := journalOf(t, base, r.ID); len(got) != 0 {
			t.Fatalf("journaled before a write: %v", got)
		}
		if _, err := st.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, ""); err != nil {
			t.Fatal(err)
		}
		want := []string{"sandbox one", "sandbox two", "state preparing"}
		if got := journalOf(t, base, r.ID); !slices.Equal(got, want) {
			t.Fatalf("after the write: %v, want %v", got, want)
		}
		ev("three")
		// A compare-and-set that does not hold writes nothing: the event
		// goes on its own, before what follows.
		if _, err := st.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StateRunning, run.ReasonNone, ""); err == nil {
			t.Fatal("a transition from a state the run is not in held")
		}
		ev("four")
		if _, err := st.Update(ctx, r.ID, func(r *run.Run) error { r.Message = "m"; return nil }); err != nil {
			t.Fatal(err)
		}
		want = append(want, "sandbox three", "sandbox four")
		if got := journalOf(t, base, r.ID); !slices.Equal(got, want) {
			t.Fatalf("after a refused write and an update: %v, want %v", got, want)
		}
		ev("five")
		want = append(want, "sandbox five")
		if got := journalOf(t, st, r.ID); !slices.Equal(got, want) {
			t.Fatalf("read through it: %v, want %v", got, want)
		}
		st.journal.batch = 10 * time.Millisecond
		ev("six")
		want = append(want, "sandbox six")
		for deadline := time.Now().Add(10 * time.Second); !slices.Equal(journalOf(t, base, r.ID), want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the batch's time went by: %v, want %v", journalOf(t, base, r.ID), want)
			}
		}
		// Another run's events go at once.
		other := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "t", Repo: "/r", Base: "b"}
		if err := base.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendEvent(ctx, other.ID, run.NewEvent(run.EventSandbox, "elsewhere", nil)); err != nil {
			t.Fatal(err)
		}
		if got := journalOf(t, base, other.ID); !slices.Equal(got, []string{"sandbox elsewhere"}) {
			t.Fatalf("another run's journal: %v", got)
		}
	})
}
