package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
)

// errNotQueued means the run left the queue while waiting (cancelled).
var errNotQueued = errors.New("the run is no longer queued")

// defaultPoll is how often a queued supervisor looks for a free slot.
const defaultPoll = 25 * time.Millisecond

// waitSlot blocks until the run may start: the coordinator gives it one
// of MaxParallel slots and no older queued run with a live supervisor is
// still waiting (FIFO by Seq). The slot is held until released (or the
// process exits).
func (s *Supervisor) waitSlot(ctx context.Context, seq int64) (coord.Slot, error) {
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
		slot, err := s.trySlot(ctx, seq)
		if err != nil || slot != nil {
			return slot, err
		}
		t.Reset(poll)
	}
}

// trySlot makes one attempt; the run must still be queued and not
// cancelled, which the coordinator asks under its queue serialisation.
func (s *Supervisor) trySlot(ctx context.Context, seq int64) (coord.Slot, error) {
	return s.Coord.TrySlot(ctx, s.Lease, seq, s.MaxParallel, func(ctx context.Context) error {
		me, err := s.Store.Get(ctx, s.ID)
		if err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		if me.State != run.StateQueued || me.CancelRequested {
			return errNotQueued
		}
		return nil
	})
}

// dequeue gives up the run's place in the queue (idempotent).
func (s *Supervisor) dequeue(seq int64) {
	if err := s.Coord.Dequeue(context.Background(), s.ID, seq); err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: dequeue: %v\n", s.ID, err)
	}
}
