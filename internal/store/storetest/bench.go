package storetest

import (
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

// Bench measures the store's hot operations on full records (FullRun), each
// sub-benchmark on a fresh store from newStore. Every store runs it in a
// few lines:
//
//	func BenchmarkConformance(b *testing.B) {
//		storetest.Bench(b, func(b *testing.B) run.Store { return openStore(b) })
//	}
func Bench(b *testing.B, newStore func(b *testing.B) run.Store) {
	b.Run("Create", func(b *testing.B) {
		s := newStore(b)
		for b.Loop() {
			if err := s.Create(ctx, FullRun(run.NewID())); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		s := newStore(b)
		r := benchRun(b, s)
		for b.Loop() {
			if _, err := s.Get(ctx, r.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Update", func(b *testing.B) {
		s := newStore(b)
		r := benchRun(b, s)
		for b.Loop() {
			if _, err := s.Update(ctx, r.ID, func(c *run.Run) error { c.MaxAttempts++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Transition", func(b *testing.B) {
		s := newStore(b)
		r := benchRun(b, s)
		// Back and forth between two active states, as attempts and their
		// checks move a run along.
		between := []run.State{run.StateRunning, run.StateExporting}
		to := run.StateExporting
		for b.Loop() {
			if _, err := s.Transition(ctx, r.ID, between, to, run.ReasonNone, "bench"); err != nil {
				b.Fatal(err)
			}
			if to == run.StateExporting {
				to = run.StateRunning
			} else {
				to = run.StateExporting
			}
		}
	})
	b.Run("AppendEvent", func(b *testing.B) {
		s := newStore(b)
		r := benchRun(b, s)
		e := run.NewEvent(run.EventEgress, "allowed", map[string]any{"decision": "allow", "host": "proxy.golang.org", "port": 443})
		for b.Loop() {
			if _, err := s.AppendEvent(ctx, r.ID, e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("List100", func(b *testing.B) {
		s := newStore(b)
		for range 100 {
			benchRun(b, s)
		}
		for b.Loop() {
			runs, broken, err := s.List(ctx, run.Filter{})
			if err != nil || len(runs) != 100 || len(broken) != 0 {
				b.Fatalf("List: %d runs, %v, %v", len(runs), broken, err)
			}
		}
	})
	// The sweep a server's worker makes every few seconds for runs a dead
	// supervisor left behind, on a queue of 1,000 runs waiting for a
	// taker beside 10 runs under way: every active run (All), or only
	// those a supervisor took up (Taken).
	b.Run("Sweep1000Queued", func(b *testing.B) {
		s := newStore(b)
		for range 10 {
			benchRun(b, s)
		}
		for range 1000 {
			r := FullRun(run.NewID())
			r.State, r.Supervisor, r.Attempts = run.StateQueued, nil, nil
			if err := s.Create(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		active := []run.State{run.StateQueued, run.StatePreparing, run.StateRunning, run.StateChecking, run.StateExporting}
		for _, tc := range []struct {
			name string
			f    run.Filter
			want int
		}{{"All", run.Filter{States: active}, 1010}, {"Taken", run.Filter{States: active, Taken: true}, 10}} {
			b.Run(tc.name, func(b *testing.B) {
				for b.Loop() {
					runs, _, err := s.List(ctx, tc.f)
					if err != nil || len(runs) != tc.want {
						b.Fatalf("List: %d runs, %v; want %d", len(runs), err, tc.want)
					}
				}
			})
		}
	})
}

// benchRun stores a full record in state running and returns it.
func benchRun(b *testing.B, s run.Store) *run.Run {
	b.Helper()
	r := FullRun(run.NewID())
	if err := s.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	return r
}
