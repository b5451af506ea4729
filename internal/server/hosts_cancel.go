package server

// hosts_cancel.go: cancels told to hosts through the heartbeat's answer.
// A host's heartbeat may wait (wait_ms) for a cancel of one of the runs
// it reports: the leases are renewed when it arrives, and the answer goes
// back as soon as a cancel of one of those runs is asked for in this
// server (its journal's cancel event), or when the wait ends. The host
// cancels those runs at once; its supervisors' own look at the record
// still catches a cancel asked for elsewhere.

import (
	"context"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Cancels wakes the heartbeats waiting on runs whose cancel was asked
// for. The zero value is ready.
type Cancels struct {
	mu      sync.Mutex
	waiting map[string]map[chan struct{}]struct{}
}

// Event is given every event appended to a run's journal (the run
// store's event hook): a cancel event wakes the heartbeats waiting on
// the run.
func (c *Cancels) Event(id string, e run.Event) {
	if c == nil || e.Type != run.EventCancel {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.waiting[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch returns a channel told of a cancel of any of ids, and the
// function that stops watching.
func (c *Cancels) watch(ids []string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == nil {
		c.waiting = map[string]map[chan struct{}]struct{}{}
	}
	for _, id := range ids {
		if c.waiting[id] == nil {
			c.waiting[id] = map[chan struct{}]struct{}{}
		}
		c.waiting[id][ch] = struct{}{}
	}
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range ids {
			delete(c.waiting[id], ch)
			if len(c.waiting[id]) == 0 {
				delete(c.waiting, id)
			}
		}
	}
}

// cancelAsked reports whether a cancel of run id was asked for.
func (h *Hosts) cancelAsked(ctx context.Context, id string) bool {
	r, err := h.Home.Store.Get(ctx, id)
	return err == nil && r.CancelRequested
}

// heartbeatWait is heartbeat, whose answer, when it has nothing to say
// (no run lost, none to cancel), waits up to in.WaitMS (at most TTL/2)
// or until hold ends for a cancel of one of the runs the host reported.
func (h *Hosts) heartbeatWait(ctx, hold context.Context, host *Host, in HeartbeatRequest) (Heartbeat, error) {
	wait := min(time.Duration(in.WaitMS)*time.Millisecond, h.TTL/2, MaxClaimWait)
	if wait <= 0 || h.Cancels == nil || len(in.Runs) == 0 {
		return h.heartbeat(ctx, host, in)
	}
	ids := make([]string, len(in.Runs))
	for i, r := range in.Runs {
		ids[i] = r.ID
	}
	// Watched before the record is read: a cancel asked for in between
	// wakes the wait.
	woken, stop := h.Cancels.watch(ids)
	defer stop()
	out, err := h.heartbeat(ctx, host, in)
	if err != nil || len(out.Lost) > 0 || len(out.Cancel) > 0 {
		return out, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-hold.Done():
			return out, nil
		case <-t.C:
			return out, nil
		case <-woken:
		}
		for _, id := range ids {
			if h.cancelAsked(ctx, id) {
				out.Cancel = append(out.Cancel, id)
			}
		}
		if len(out.Cancel) > 0 {
			return out, nil
		}
	}
}
