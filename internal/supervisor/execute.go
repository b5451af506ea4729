package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Causes of the run context ending.
var (
	errRunTimeout      = errors.New("the run's time limit was reached")
	errCancelRequested = errors.New("the run was cancelled")
)

var activeStates = []run.State{run.StateQueued, run.StatePreparing, run.StateRunning, run.StateChecking, run.StateExporting}

// cancelPoll is how often the supervisor rereads the run for a cancel
// request (the CLI also signals it; this catches a missed signal).
const cancelPoll = 200 * time.Millisecond

// execute is the run's life: queue, prepare, attempts, export.
func (s *Supervisor) execute(parent context.Context) error {
	r, err := s.Store.Get(parent, s.ID)
	if err != nil {
		return err
	}
	if r.State != run.StateQueued {
		return fmt.Errorf("run is %s, not queued", r.State)
	}
	host, _ := os.Hostname()
	info := &run.SupervisorInfo{PID: os.Getpid(), Host: host, StartedAt: time.Now().UTC()}
	info.ProcStart, _ = procStart(info.PID) // 0 where unknown: cancel then never signals, it polls
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	go s.watchCancel(ctx, cancel)

	// queued: a free slot at once (the usual case) records this process
	// with the move to preparing; a run that waits records it first, so
	// that cancel can signal it while it waits.
	defer s.dequeue(r.Seq)
	recorded := false
	slot, err := s.trySlot(ctx, r.Seq)
	if err == nil && slot == nil {
		if _, err := s.Store.Update(ctx, s.ID, func(r *run.Run) error { r.Supervisor = info; return nil }); err != nil {
			s.stopped(ctx, run.StateQueued)
			return fmt.Errorf("record supervisor: %w", err)
		}
		recorded = true
		slot, err = s.waitSlot(ctx, r.Seq)
	}
	if err != nil {
		s.stopped(ctx, run.StateQueued)
		return nil
	}
	defer slot.Release()
	s.dequeue(r.Seq)

	// queued -> preparing: loses to a cancel that came first.
	r, err = s.cas(ctx, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, "", func(r *run.Run) {
		if !recorded {
			r.Supervisor = info
		}
	})
	if errors.Is(err, run.ErrConflict) {
		return nil
	}
	if err != nil {
		s.stopped(ctx, run.StateQueued)
		return fmt.Errorf("start preparing: %w", err)
	}
	if r.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, r.Timeout.D(), errRunTimeout)
		defer stop()
	}

	rc := &runState{r: r}
	s.release = func() { s.cleanup(rc) }
	defer s.releaseResources()
	if err := s.prepare(ctx, rc); err != nil {
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return nil
		}
		s.event(run.NewEvent(run.EventWarning, "prepare failed: "+err.Error(), nil))
		s.finish(run.StateFailed, run.ReasonSandboxError, err.Error())
		return err
	}
	ok, err := s.attempts(ctx, rc)
	if err != nil || !ok {
		return err
	}
	// Nothing runs in the sandbox any more: stop it before the workspace
	// is read, so no process left behind can change it during the scan.
	s.releaseResources()
	return s.export(ctx, rc)
}

// watchCancel ends ctx when the run is cancelled or leaves the states this
// supervisor drives (a cancel CAS by the CLI).
func (s *Supervisor) watchCancel(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(cancelPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := s.Store.Get(ctx, s.ID)
		if err != nil {
			continue
		}
		if r.CancelRequested || r.State.Terminal() {
			cancel(errCancelRequested)
			return
		}
	}
}

// stopped ends the run after its context ended, with the state the cause
// calls for. from is the state to move from ("" = any active state).
func (s *Supervisor) stopped(ctx context.Context, from run.State) {
	state, reason, msg := run.StateInterrupted, run.ReasonInterrupted, "the supervisor was stopped; resume the run with 'agentrun resume "+s.ID+"'"
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errRunTimeout):
		state, reason, msg = run.StateFailed, run.ReasonTimeout, errRunTimeout.Error()
	case errors.Is(cause, errCancelRequested):
		state, reason, msg = run.StateCancelled, run.ReasonCancelled, "cancelled"
	default:
		if r, err := s.Store.Get(context.Background(), s.ID); err == nil && r.CancelRequested {
			state, reason, msg = run.StateCancelled, run.ReasonCancelled, "cancelled"
		}
	}
	if from != "" {
		s.transition([]run.State{from}, state, reason, msg)
		return
	}
	s.finish(state, reason, msg)
}

// finish moves the run from whatever active state to an end state. A lost
// compare-and-set (a cancel got there first) is fine.
func (s *Supervisor) finish(state run.State, reason run.Reason, msg string) {
	s.transition(activeStates, state, reason, msg)
}

func (s *Supervisor) transition(from []run.State, state run.State, reason run.Reason, msg string) {
	if state.Terminal() {
		s.releaseResources()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cas(ctx, from, state, reason, msg, nil); err != nil && !errors.Is(err, run.ErrConflict) {
		fmt.Fprintf(os.Stderr, "supervise %s: transition to %s: %v\n", s.ID, state, err)
	}
}

// clearSupervisor forgets this process in the record once it is done.
func (s *Supervisor) clearSupervisor() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pending := s.takePending()
	_, _ = s.Store.Update(ctx, s.ID, func(r *run.Run) error {
		for _, p := range pending {
			p(r)
		}
		if r.Supervisor != nil && r.Supervisor.PID == os.Getpid() {
			r.Supervisor = nil
		}
		return nil
	})
}

// event journals e; the journal is best effort from here (a failing
// journal must not kill the run).
func (s *Supervisor) event(e run.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Store.AppendEvent(ctx, s.ID, e); err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: journal %s: %v\n", s.ID, e.Type, err)
	}
}
