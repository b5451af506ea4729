package sqlstore_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

var ctx = context.Background()

func openStore(tb testing.TB, url string) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		storetest.Run(t, func(t *testing.T) run.Store { return openStore(t, newURL(t)) })
	})
}

// BenchmarkConformance runs the suite's benchmarks on each database. An
// Update is one transaction (read the row locked, decode, encode, write)
// and an AppendEvent one transaction of two statements, each commit
// synced to disk.
func BenchmarkConformance(b *testing.B) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		storetest.Bench(b, func(b *testing.B) run.Store { return openStore(b, newURL(b)) })
	})
}

// TestCountStates: the count by state agrees with List's records.
func TestCountStates(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		s := openStore(t, newURL(t))
		for i, st := range []run.State{run.StateQueued, run.StateQueued, run.StateRunning, run.StateSucceeded, run.StateQueued} {
			r := storetest.FullRun(run.NewID())
			r.State = st
			if err := s.Create(ctx, r); err != nil {
				t.Fatal(i, err)
			}
		}
		got, err := s.CountStates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		runs, _, err := s.List(ctx, run.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[run.State]int{}
		for _, r := range runs {
			want[r.State]++
		}
		if !maps.Equal(got, want) || got[run.StateQueued] != 3 {
			t.Fatalf("CountStates = %v, want %v", got, want)
		}
	})
}

// TestJournaledWrites: the events of UpdateJournaled and
// TransitionJournaled land in order with the record (before the state
// event), and not at all when fn refuses, the state is not the one asked
// for, or one of them has no type.
func TestJournaledWrites(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		s := openStore(t, newURL(t))
		r := storetest.FullRun(run.NewID())
		r.State = run.StateQueued
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		ev := func(msg string) run.Event { return run.NewEvent(run.EventWarning, msg, nil) }
		journal := func() (out []string) {
			t.Helper()
			evs, err := s.Events(ctx, r.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					t.Fatalf("event %d has seq %d", i, e.Seq)
				}
				out = append(out, string(e.Type)+":"+e.Message+string(e.State))
			}
			return out
		}
		version := func() int64 {
			t.Helper()
			got, err := s.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Version
		}
		v0 := version()
		refused := errors.New("refused")
		if _, err := s.UpdateJournaled(ctx, r.ID, []run.Event{ev("a")}, func(*run.Run) error { return refused }); !errors.Is(err, refused) {
			t.Fatalf("refused update: %v", err)
		}
		if _, err := s.TransitionJournaled(ctx, r.ID, []run.Event{ev("b")}, []run.State{run.StateRunning}, run.StateChecking, "", "", nil); !errors.Is(err, run.ErrConflict) {
			t.Fatalf("transition from the wrong state: %v", err)
		}
		if _, err := s.TransitionJournaled(ctx, r.ID, []run.Event{ev("c"), {Message: "no type"}}, []run.State{run.StateQueued}, run.StatePreparing, "", "", nil); err == nil {
			t.Fatal("an event without a type was taken")
		}
		if got := journal(); len(got) != 0 || version() != v0 {
			t.Fatalf("refused writes changed the run: journal %v, version %d (was %d)", got, version(), v0)
		}
		out, err := s.TransitionJournaled(ctx, r.ID, []run.Event{ev("d"), ev("e")}, []run.State{run.StateQueued}, run.StatePreparing, "", "",
			func(r *run.Run) error { r.Task = "changed"; return nil })
		if err != nil || out.State != run.StatePreparing || out.Task != "changed" || out.Version != v0+1 {
			t.Fatalf("transition: %v %+v", err, out)
		}
		if _, err := s.UpdateJournaled(ctx, r.ID, []run.Event{ev("f")}, func(r *run.Run) error { r.Task = "again"; return nil }); err != nil {
			t.Fatal(err)
		}
		if got, want := journal(), []string{"warning:d", "warning:e", "state:preparing", "warning:f"}; !slices.Equal(got, want) {
			t.Fatalf("journal %v, want %v", got, want)
		}
	})
}
