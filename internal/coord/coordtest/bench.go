package coordtest

import (
	"testing"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
)

// Bench measures what every run pays on the coordinator: taking and
// giving up its lease, and taking a slot when one is free and nobody waits
// (the usual start of a run). One fresh coordinator per sub-benchmark.
func Bench(b *testing.B, newCoord func(b *testing.B) coord.Coordinator) {
	b.Run("AcquireRelease", func(b *testing.B) {
		c := newCoord(b)
		id := run.NewID()
		for b.Loop() {
			l, err := c.Acquire(ctx, id, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TrySlot", func(b *testing.B) {
		c := newCoord(b)
		l := acquire(b, c, run.NewID())
		for b.Loop() {
			s, err := c.TrySlot(ctx, l, 1, 1, nil)
			if err != nil || s == nil {
				b.Fatalf("TrySlot: %v, %v", s, err)
			}
			if err := s.Release(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
