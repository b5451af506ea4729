package supervisor

import (
	"context"
	"fmt"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// egressStep is the allowlist proxy, the only way out of a sandbox whose
// network is the allowlist. For any other network it holds nothing and
// Socket is "".
//
// Start starts the proxy on a unix socket in the run's sandbox state
// directory (or a short temp dir); every decision it makes is journaled
// as an egress event. Stop stops the proxy (its last decisions journaled)
// and removes the socket; it is safe twice and before Start.
type egressStep struct {
	// Record (the run record) gives the network and the allowlist.
	Record *run.Run
	Layout layout.Layout
	// StartProxy is Deps.StartEgress (nil: this build has no proxy).
	StartProxy func(ctx context.Context, r *run.Run, socket string, getenv func(string) string, onRecord func(egress.Record)) (stop func(context.Context) error, err error)
	// Getenv gives the run's handoff values: the proxy variables.
	Getenv func(string) string
	Event  func(run.Event)

	socket string
	stop   func(context.Context) error
	clean  func()
}

// Start implements resource.
func (s *egressStep) Start(ctx context.Context) error {
	if s.Record.Sandbox.Network != string(sandbox.NetworkAllowlist) {
		return nil
	}
	if s.StartProxy == nil {
		return errMissing("the egress proxy")
	}
	sock, clean, err := socketPath(s.Layout, s.Record.ID, "egress.sock")
	if err != nil {
		return fmt.Errorf("egress socket: %w", err)
	}
	s.clean = clean
	stop, err := s.StartProxy(ctx, s.Record, sock, s.Getenv, func(rec egress.Record) {
		s.Event(run.NewEvent(run.EventEgress, "", rec))
	})
	if err != nil {
		return fmt.Errorf("start egress proxy: %w", err)
	}
	s.stop, s.socket = stop, sock
	return nil
}

// Stop implements resource.
func (s *egressStep) Stop(ctx context.Context) {
	if s.stop != nil {
		_ = s.stop(ctx)
		s.stop = nil
	}
	if s.clean != nil {
		s.clean()
		s.clean = nil
	}
}

// Socket is the proxy's unix socket ("" without a proxy).
func (s *egressStep) Socket() string { return s.socket }
