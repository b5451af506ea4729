package sqlcoord_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// TestStressManyHolders is coordtest's stress test across holders: four
// coordinators, each with its own connections as separate hosts would
// have, queue 16 runs at once for 3 slots and poll for them. Never more
// than 3 hold a slot, and they get them in seq order.
func TestStressManyHolders(t *testing.T) {
	t.Parallel()
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		t.Parallel()
		const holders, runs, limit = 4, 16, 3
		url := newURL(t)
		cs := make([]coord.Coordinator, holders)
		for i := range cs {
			cs[i] = openCoord(t, url, conformanceTTL)
		}
		type waiter struct {
			c     coord.Coordinator
			id    string
			seq   int64
			lease coord.Lease
		}
		ws := make([]*waiter, runs)
		for i := range ws {
			w := &waiter{c: cs[i%holders], id: run.NewID(), seq: int64(i + 1)}
			w.lease = mustAcquire(t, w.c, w.id)
			if err := w.c.Enqueue(ctx, w.lease, w.seq); err != nil {
				t.Fatal(err)
			}
			ws[i] = w
		}
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var (
			mu      sync.Mutex
			order   []int64
			holding atomic.Int32
			most    atomic.Int32
			wg      sync.WaitGroup
			start   = make(chan struct{})
		)
		for _, w := range slices.Backward(ws) {
			wg.Go(func() {
				<-start
				var s coord.Slot
				for s == nil {
					var err error
					if s, err = w.c.TrySlot(dctx, w.lease, w.seq, limit, nil); err != nil {
						t.Errorf("TrySlot seq %d: %v", w.seq, err)
						return
					}
					if s == nil {
						select {
						case <-dctx.Done():
							t.Errorf("seq %d got no slot", w.seq)
							return
						case <-time.After(time.Millisecond):
						}
					}
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				mu.Lock()
				order = append(order, w.seq)
				mu.Unlock()
				if err := w.c.Dequeue(ctx, w.id, w.seq); err != nil {
					t.Error(err)
				}
				time.Sleep(5 * time.Millisecond)
				holding.Add(-1)
				if err := s.Release(); err != nil {
					t.Error(err)
				}
				if err := w.lease.Release(); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if most.Load() > limit {
			t.Errorf("%d runs held a slot at once; the limit is %d", most.Load(), limit)
		}
		if len(order) != runs || !slices.IsSorted(order) {
			t.Errorf("slots taken in the order %v; want 1..%d", order, runs)
		}
	})
}
