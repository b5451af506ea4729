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
