package sqlstore_test

import (
	"context"
	"maps"
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
