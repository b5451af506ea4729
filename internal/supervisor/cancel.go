package supervisor

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// Cancel asks for run id to end cancelled. A queued or preparing run is
// moved to cancelled directly (compare-and-set): its supervisor's own
// compare-and-set to running then fails, so its agent never starts. A
// running one's supervisor is signalled (SIGTERM, only after checking it
// holds the run's lock) and kills the agent's process group. Cancel does
// not wait; see WaitEnd. Cancelling an ended run changes nothing.
func Cancel(ctx context.Context, st run.Store, l layout.Layout, id string) (*run.Run, error) {
	r, err := st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r, err = Reconcile(ctx, st, l, r); err != nil {
		return nil, err
	}
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
	nr, err := st.Transition(ctx, id, []run.State{run.StateQueued, run.StatePreparing}, run.StateCancelled, run.ReasonCancelled,
		"cancelled before the agent started")
	if err != nil && !errors.Is(err, run.ErrConflict) {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	if err := signalSupervisor(ctx, st, l, id); err != nil {
		return nil, err
	}
	if nr != nil {
		return nr, nil
	}
	return st.Get(ctx, id)
}

var errEnded = errors.New("run already ended")

// signalSupervisor sends SIGTERM to the run's live supervisor, if any.
func signalSupervisor(ctx context.Context, st run.Store, l layout.Layout, id string) error {
	r, err := st.Get(ctx, id)
	if err != nil {
		return err
	}
	if r.Supervisor == nil || r.Supervisor.PID <= 1 {
		return nil // not started yet: it sees CancelRequested when it looks
	}
	held, err := Held(l.SupervisorLock(id))
	if err != nil || !held {
		return err
	}
	if err := syscall.Kill(r.Supervisor.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal supervisor: %w", err)
	}
	return nil
}

// WaitEnd polls until the run is in a terminal state (reconciling it, so a
// dead supervisor does not make it wait forever) or ctx ends.
func WaitEnd(ctx context.Context, st run.Store, l layout.Layout, id string, poll time.Duration) (*run.Run, error) {
	for {
		r, err := st.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r, err = Reconcile(ctx, st, l, r); err != nil {
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
