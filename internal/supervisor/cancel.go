package supervisor

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Cancel asks for run id to end cancelled. A queued or preparing run is
// moved to cancelled directly (compare-and-set): its supervisor's own
// compare-and-set to running then fails, so its agent never starts. A
// running one's supervisor is signalled (SIGTERM, only after checking it
// holds the run's lease) and kills the agent's process group. Cancel does
// not wait; see WaitEnd. Cancelling an ended run changes nothing. A run
// whose supervisor has died but whose record cannot be updated comes back
// as it is in fact (interrupted) with ErrNotRecorded.
func Cancel(ctx context.Context, h Home, id string) (*run.Run, error) {
	st := h.Store
	r, err := st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	nr, err := Reconcile(ctx, h, r)
	if err != nil {
		// A run whose supervisor is gone has stopped, whether or not its
		// record can say so (a full disk): there is nothing to cancel.
		if dead, derr := Unsupervised(ctx, h, r); derr == nil && dead {
			return stoppedNotRecorded(r, err), fmt.Errorf("%w: %w", ErrNotRecorded, err)
		}
		return nil, err
	}
	r = nr
	if r.State.Terminal() {
		return r, nil
	}
	if _, err := st.Update(ctx, id, func(r *run.Run) error {
		if r.State.Terminal() {
			return errEnded
		}
		r.CancelRequested = true
		return nil
	}); errors.Is(err, errEnded) {
		return st.Get(ctx, id)
	} else if err != nil {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	_, _ = st.AppendEvent(ctx, id, run.NewEvent(run.EventCancel, "cancel requested", nil))
	nr, err = st.Transition(ctx, id, []run.State{run.StateQueued, run.StatePreparing}, run.StateCancelled, run.ReasonCancelled,
		"cancelled before the agent started")
	if err != nil && !errors.Is(err, run.ErrConflict) {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	if err := signalSupervisor(ctx, h, id); err != nil {
		return nil, err
	}
	if nr != nil {
		return nr, nil
	}
	return st.Get(ctx, id)
}

var errEnded = errors.New("run already ended")

// ErrNotRecorded (wrapped, with the store's error) comes with the run as it
// is in fact: its supervisor has stopped, but the record could not be
// marked interrupted (e.g. the disk is full).
var ErrNotRecorded = errors.New("the run has stopped, but its record could not be updated")

// stoppedNotRecorded is r as Reconcile would have left it.
func stoppedNotRecorded(r *run.Run, err error) *run.Run {
	c := *r
	c.State, c.Reason = run.StateInterrupted, run.ReasonInterrupted
	c.Message = "the supervisor stopped without finishing the run (not recorded: " + err.Error() + ")"
	return &c
}

// Unsupervised reports whether active run r has no live supervisor and is
// not about to get one (see AboutToStart): it has stopped, whatever its
// record says.
func Unsupervised(ctx context.Context, h Home, r *run.Run) (bool, error) {
	if !r.State.Active() {
		return false, nil
	}
	held, err := h.Coord.Held(ctx, r.ID)
	if err != nil || held {
		return false, err
	}
	return !AboutToStart(r) && !(h.Claimed && Unclaimed(r)), nil
}

// AboutToStart reports a freshly submitted run whose supervisor is being
// spawned: queued, never attempted, none recorded, within spawnGrace of its
// creation (submit creates the record, then takes the lease).
func AboutToStart(r *run.Run) bool {
	return r.State == run.StateQueued && r.Supervisor == nil && len(r.Attempts) == 0 && time.Since(r.CreatedAt) < spawnGrace
}

// signalSupervisor sends SIGTERM to the run's live supervisor, if any:
// only while some process holds the run's lease, and only to the recorded
// PID if it is still the process that started at the recorded time (a
// record can name a PID that has since gone to another process: a
// supervisor killed with -9 whose run was resumed). Where that cannot be
// told, nothing is signalled: the supervisor sees CancelRequested within
// cancelPoll.
func signalSupervisor(ctx context.Context, h Home, id string) error {
	r, err := h.Store.Get(ctx, id)
	if err != nil {
		return err
	}
	if r.Supervisor == nil || r.Supervisor.PID <= 1 {
		return nil // not started yet: it sees CancelRequested when it looks
	}
	held, err := h.Coord.Held(ctx, id)
	if err != nil || !held {
		return err
	}
	if _, err := signalProcess(r.Supervisor.PID, r.Supervisor.ProcStart, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal supervisor: %w", err)
	}
	return nil
}

// WaitEnd polls until the run is in a terminal state (reconciling it, so a
// dead supervisor does not make it wait forever) or ctx ends.
func WaitEnd(ctx context.Context, h Home, id string, poll time.Duration) (*run.Run, error) {
	for {
		r, err := h.Store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r, err = Reconcile(ctx, h, r); err != nil {
			return nil, err
		}
		if r.State.Terminal() {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(poll):
		}
	}
}
