package supervisor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Changes to the run record ride on the next state change where they can:
// a state change is a write of run.json anyway, and each write costs
// about a millisecond (fsync, rename, fsync of the directory).

// later queues a change that records a fact whatever state comes next (an
// attempt's end, check results, the export's result): the next state
// change, or clearSupervisor at the very end, writes it.
func (s *Supervisor) later(fn func(*run.Run)) {
	s.pendingMu.Lock()
	s.pending = append(s.pending, fn)
	s.pendingMu.Unlock()
}

func (s *Supervisor) takePending() []func(*run.Run) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	p := s.pending
	s.pending = nil
	return p
}

// cas is the state compare-and-set, writing the pending changes with it;
// fn (may be nil) is applied only if the compare-and-set holds. When it
// does not, the pending changes are written on their own.
func (s *Supervisor) cas(ctx context.Context, from []run.State, to run.State, reason run.Reason, msg string, fn func(*run.Run)) (*run.Run, error) {
	pending := s.takePending()
	apply := func(r *run.Run) error {
		for _, p := range pending {
			p(r)
		}
		if fn != nil {
			fn(r)
		}
		return nil
	}
	r, err := s.Store.TransitionWith(ctx, s.ID, from, to, reason, msg, apply)
	if err != nil && len(pending) > 0 {
		s.writePending(pending)
	}
	return r, err
}

// writePending writes changes that could not ride on a state change.
func (s *Supervisor) writePending(pending []func(*run.Run)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Store.Update(ctx, s.ID, func(r *run.Run) error {
		for _, p := range pending {
			p(r)
		}
		return nil
	}); err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: record: %v\n", s.ID, err)
	}
}
