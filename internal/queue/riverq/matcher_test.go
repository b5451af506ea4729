package riverq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/queue"
)

// TestMatcherHandsEachOfferOnce: offers and takers meeting at once, some
// takers refusing, every offer ends taken exactly once, and a taker that
// fits none is given none.
func TestMatcherHandsEachOfferOnce(t *testing.T) {
	var m matcher
	const n = 200
	var mu sync.Mutex
	taken := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var offers sync.WaitGroup
	for i := range n {
		offers.Go(func() {
			o := queue.Offer{Run: fmt.Sprint("r", i), Seq: int64(i), Backend: "host"}
			for {
				if took, _ := m.offer(ctx, o, 50*time.Millisecond); took || ctx.Err() != nil {
					return
				}
			}
		})
	}
	var takers sync.WaitGroup
	for k := range 8 {
		takers.Go(func() {
			for i := 0; ; i++ {
				o, done, err := m.next(ctx, func(o queue.Offer) bool { return o.Backend == "host" })
				if err != nil {
					return
				}
				took := (i+k)%5 != 0 // some refuse: the offer comes again
				if took {
					mu.Lock()
					taken[o.Run]++
					full := len(taken) == n
					mu.Unlock()
					done(true)
					if full {
						cancel()
					}
					continue
				}
				done(false)
			}
		})
	}
	offers.Wait()
	cancel()
	takers.Wait()
	if len(taken) != n {
		t.Fatalf("%d of %d offers taken", len(taken), n)
	}
	for r, c := range taken {
		if c != 1 {
			t.Errorf("%s taken %d times", r, c)
		}
	}
	short, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	go m.offer(context.Background(), queue.Offer{Run: "d", Backend: "docker"}, 100*time.Millisecond)
	if _, _, err := m.next(short, func(o queue.Offer) bool { return o.Backend == "host" }); err == nil {
		t.Error("a taker that fits nothing was given an offer")
	}
}
