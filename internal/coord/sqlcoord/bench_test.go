package sqlcoord_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// BenchmarkClaims measures claims per second with 8 claimers, each its own
// coordinator (as 8 hosts would be) on one database: a claim is what a
// worker does to start a run, Acquire, TrySlot and the two Releases;
// "queued" adds the Enqueue and Dequeue around it. Every run is new; the
// slots (16) outnumber the claimers, so no claim waits for one.
func BenchmarkClaims(b *testing.B) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		for _, queued := range []bool{false, true} {
			name := "plain"
			if queued {
				name = "queued"
			}
			b.Run(name, func(b *testing.B) { benchClaims(b, newURL(b), queued) })
		}
	})
}

func benchClaims(b *testing.B, url string, queued bool) {
	const claimers, slots = 8, 16
	cs := make([]coord.Coordinator, claimers)
	for i := range cs {
		cs[i] = openCoord(b, url, 0)
	}
	var seq, left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := claim(c, seq.Add(1), queued); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
}

func claim(c coord.Coordinator, seq int64, queued bool) error {
	id := run.NewID()
	l, err := c.Acquire(ctx, id, 0)
	if err != nil {
		return err
	}
	defer l.Release()
	if queued {
		if err := c.Enqueue(ctx, l, seq); err != nil {
			return err
		}
	}
	var s coord.Slot
	for {
		if s, err = c.TrySlot(ctx, l, seq, 16, nil); err != nil || s != nil {
			break
		}
		time.Sleep(time.Millisecond) // an older claim goes first
	}
	if err != nil {
		return err
	}
	if queued {
		if err := c.Dequeue(ctx, id, seq); err != nil {
			return err
		}
	}
	if err := s.Release(); err != nil {
		return err
	}
	return l.Release()
}
