package riverq

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/queue"
)

// matcher pairs the dispatch jobs River's workers hold (offers) with the
// takers waiting for a run (a host's claim, the server's worker), in
// memory. An offer goes to the first waiting taker it fits; a taker takes
// the oldest waiting offer that fits it.
type matcher struct {
	mu     sync.Mutex
	offers []*held // by Seq, then arrival
	takers []*taker
}

// held is one offer waiting for a taker.
type held struct {
	o      queue.Offer
	handed chan struct{} // closed when a taker took it off the list
	result chan bool     // the taker's answer: whether it took the run
}

// taker is one taker waiting for an offer.
type taker struct {
	fits func(queue.Offer) bool
	got  chan *held // buffered: the offer it was given
}

// offer holds o until a taker has answered it, or for hold at most, or
// until ctx ends: answered says whether a taker came, took whether it
// took the run.
func (m *matcher) offer(ctx context.Context, o queue.Offer, hold time.Duration) (took, answered bool) {
	h := &held{o: o, handed: make(chan struct{}), result: make(chan bool, 1)}
	m.mu.Lock()
	if i := slices.IndexFunc(m.takers, func(t *taker) bool { return t.fits(o) }); i >= 0 {
		t := m.takers[i]
		m.takers = slices.Delete(m.takers, i, i+1)
		close(h.handed)
		t.got <- h
	} else {
		i := slices.IndexFunc(m.offers, func(x *held) bool { return x.o.Seq > o.Seq })
		if i < 0 {
			i = len(m.offers)
		}
		m.offers = slices.Insert(m.offers, i, h)
	}
	m.mu.Unlock()
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-h.handed:
	case <-t.C:
	case <-ctx.Done():
	}
	m.mu.Lock()
	if i := slices.Index(m.offers, h); i >= 0 {
		m.offers = slices.Delete(m.offers, i, i+1)
		m.mu.Unlock()
		return false, false
	}
	m.mu.Unlock()
	// A taker has it: its answer comes once it has tried the lease.
	return <-h.result, true
}

// next waits until ctx ends for an offer that fits, and returns it with
// done, which the caller must call with whether it took the run. An
// offer waiting already is taken without waiting, even with ctx ended.
func (m *matcher) next(ctx context.Context, fits func(queue.Offer) bool) (queue.Offer, func(bool), error) {
	m.mu.Lock()
	if i := slices.IndexFunc(m.offers, func(h *held) bool { return fits(h.o) }); i >= 0 {
		h := m.offers[i]
		m.offers = slices.Delete(m.offers, i, i+1)
		close(h.handed)
		m.mu.Unlock()
		return h.o, answer(h), nil
	}
	if err := ctx.Err(); err != nil {
		m.mu.Unlock()
		return queue.Offer{}, nil, err
	}
	t := &taker{fits: fits, got: make(chan *held, 1)}
	m.takers = append(m.takers, t)
	m.mu.Unlock()
	select {
	case h := <-t.got:
		return h.o, answer(h), nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	if i := slices.Index(m.takers, t); i >= 0 {
		m.takers = slices.Delete(m.takers, i, i+1)
		m.mu.Unlock()
		return queue.Offer{}, nil, ctx.Err()
	}
	m.mu.Unlock()
	// An offer was given to it as ctx ended: it is this taker's to answer.
	h := <-t.got
	return h.o, answer(h), nil
}

// waiting is a copy of the offers held now, oldest first.
func (m *matcher) waiting() []queue.Offer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]queue.Offer, len(m.offers))
	for i, h := range m.offers {
		out[i] = h.o
	}
	return out
}

// answer is done for h: the first call answers, later ones do nothing.
func answer(h *held) func(bool) {
	var once sync.Once
	return func(took bool) { once.Do(func() { h.result <- took }) }
}
