package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRunLocksPruned hammers the per-run locks from many goroutines over
// many ids: no two holders of one id overlap, and once all are done no
// lock is left in the map.
func TestRunLocksPruned(t *testing.T) {
	h := &Hosts{}
	const ids, workers, rounds = 64, 16, 200
	inside := make([]atomic.Int32, ids)
	var overlaps atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				n := (w*7 + i*13) % ids
				unlock := h.lockRun(fmt.Sprintf("r%d", n))
				if inside[n].Add(1) != 1 {
					overlaps.Add(1)
				}
				if i%5 == 0 {
					// A holder that yields lets waiters pile up on the id.
					for range 10 {
						_ = h.lockedForTest()
					}
				}
				inside[n].Add(-1)
				unlock()
				if i%3 == 0 {
					unlock() // a second call does nothing
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d times two holders of one run's lock overlapped", n)
	}
	if n := h.lockedForTest(); n != 0 {
		t.Errorf("%d run locks left in the map, want none", n)
	}
}

func (h *Hosts) lockedForTest() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.locks)
}
