package coordtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
)

// testStress queues 8 runs at once for 2 slots, each polling TrySlot as a
// supervisor does: never more than 2 hold a slot, and they get their slots
// in the order of their seq.
func testStress(t *testing.T, c coord.Coordinator) {
	const runs, limit = 8, 2
	ws := make([]*waiter, runs)
	for i := range ws {
		ws[i] = enqueued(t, c, int64(i+1))
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var (
		mu            sync.Mutex
		holding, most int
		order         []int64
		start         = make(chan struct{})
		wg            sync.WaitGroup
	)
	// Started youngest first, so that FIFO is not what the scheduler
	// would have done anyway.
	for _, w := range slices.Backward(ws) {
		wg.Go(func() {
			<-start
			var s coord.Slot
			for s == nil {
				var err error
				if s, err = c.TrySlot(dctx, w.lease, w.seq, limit, nil); err != nil {
					t.Errorf("TrySlot seq %d: %v", w.seq, err)
					return
				}
				if s == nil {
					select {
					case <-dctx.Done():
						t.Errorf("seq %d got no slot within a minute", w.seq)
						return
					case <-time.After(time.Millisecond):
					}
				}
			}
			// Counted after the slot is taken and before it is given
			// up, so holding never exceeds the slots really held.
			mu.Lock()
			holding++
			most = max(most, holding)
			order = append(order, w.seq)
			mu.Unlock()
			if err := c.Dequeue(ctx, w.id, w.seq); err != nil {
				t.Errorf("Dequeue seq %d: %v", w.seq, err)
			}
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			holding--
			mu.Unlock()
			if err := s.Release(); err != nil {
				t.Errorf("Release slot seq %d: %v", w.seq, err)
			}
			if err := w.lease.Release(); err != nil {
				t.Errorf("Release lease seq %d: %v", w.seq, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if most > limit {
		t.Errorf("%d runs held a slot at once; the limit is %d", most, limit)
	}
	if len(order) != runs || !slices.IsSorted(order) {
		t.Errorf("runs got their slots in the order %v; want seq 1..%d", order, runs)
	}
}
