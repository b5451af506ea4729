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

// errClaimedElsewhere leaves a run's record as it is in unclaim.
var errClaimedElsewhere = errors.New("the run is no longer this supervisor's")

// unclaim takes this supervisor's record off a run that is still queued
// under it, after its lease was lost, so that the run counts as unclaimed
// again. A run that moved on, or that another supervisor recorded, is
// left alone.
func (s *Supervisor) unclaim(info *run.SupervisorInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Store.Update(ctx, s.ID, func(r *run.Run) error {
		// Several runs' supervisors may share a process: the time it
		// recorded tells this one's record (to the microsecond that a
		// database keeps).
		if r.State != run.StateQueued || r.Supervisor == nil || r.Supervisor.PID != info.PID || r.Supervisor.Host != info.Host ||
			!r.Supervisor.StartedAt.Truncate(time.Microsecond).Equal(info.StartedAt.Truncate(time.Microsecond)) {
			return errClaimedElsewhere
		}
		r.Supervisor = nil
		return nil
	})
	if err != nil && !errors.Is(err, errClaimedElsewhere) {
		fmt.Fprintf(os.Stderr, "supervise %s: unclaim: %v\n", s.ID, err)
	}
}
