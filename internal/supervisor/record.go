package supervisor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"golang.org/x/sys/unix"
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
	if err == nil {
		s.tellWaiter()
	}
	return r, err
}

// tellWaiter tells a waiting submit (Waiter) that the run's state
// changed. It never blocks: a byte still unread says as much as two, and
// a submit that no longer waits (it ended: EPIPE) needs none.
func (s *Supervisor) tellWaiter() {
	if s.Waiter != nil {
		_ = unix.Sendmsg(int(s.Waiter.Fd()), []byte{1}, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	}
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
