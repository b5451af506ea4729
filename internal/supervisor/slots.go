package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// errNotQueued means the run left the queue while waiting (cancelled).
var errNotQueued = errors.New("the run is no longer queued")

// defaultPoll is how often a queued supervisor looks for a free slot.
const defaultPoll = 25 * time.Millisecond

// waitSlot blocks until the run may start: a slot file among
// slots/0..MaxParallel-1 is locked by this process and no older queued run
// with a live supervisor is still waiting (FIFO by Seq). The returned file
// holds the slot until closed (or the process exits).
func (s *Supervisor) waitSlot(ctx context.Context) (*os.File, error) {
	poll := s.Poll
	if poll <= 0 {
		poll = defaultPoll
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		f, err := s.trySlot(ctx)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return f, nil
		}
		t.Reset(poll)
	}
}

// trySlot makes one attempt under queue.lock.
func (s *Supervisor) trySlot(ctx context.Context) (*os.File, error) {
	q, err := openLock(s.Layout.QueueLock())
	if err != nil {
		return nil, err
	}
	defer q.Close() // releases queue.lock
	if err := lock(q); err != nil {
		return nil, err
	}
	me, err := s.Store.Get(ctx, s.ID)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	if me.State != run.StateQueued || me.CancelRequested {
		return nil, errNotQueued
	}
	n := max(s.MaxParallel, 1)
	var slot *os.File
	for k := range n {
		if slot, err = tryLockPath(s.Layout.SlotLock(k)); err != nil {
			return nil, err
		}
		if slot != nil {
			break
		}
	}
	if slot == nil {
		return nil, nil
	}
	// A free slot: take it unless an older queued run is still waiting.
	older, err := s.olderWaiting(ctx, me.Seq)
	if err != nil || older {
		slot.Close()
		return nil, err
	}
	return slot, nil
}
