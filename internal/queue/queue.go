// Package queue is the seam of the team server's dispatch queue: what
// waits to be handed to an agent host (or to the server's own worker), in
// what order, what is handed out, retried, and rescued after a crash of
// the server. Its implementation is internal/queue/riverq, on River;
// internal/coord/sqlcoord still owns the leases and their fencing tokens,
// which decide who executes a run, and the server the claims.
package queue

import (
	"context"
	"time"
)

// Queue is the dispatch queue on one database. Enqueue works from its
// opening; runs are handed to takers (Next) from Start to Stop.
type Queue interface {
	// Enqueue records queueings of runs; a queueing recorded already is
	// skipped.
	Enqueue(ctx context.Context, runs ...Queued) error
	// Sweep records, at a server's start, the queueings of runs queued
	// that may have none (queued while no server ran, or held by a
	// server that died).
	Sweep(ctx context.Context, runs []Queued) error
	// Start starts handing runs out: each is checked with check first.
	Start(ctx context.Context, check Check) error
	// Stop stops handing runs out; what was held waits for the next start.
	Stop(ctx context.Context) error
	// Close stops the queue and closes what its opening opened.
	Close() error
	// Next waits until ctx ends for a run that fits and returns it with
	// done, which the caller must call with whether it took the run (its
	// lease).
	Next(ctx context.Context, fits func(Offer) bool) (Offer, func(took bool), error)
	// Waiting are the runs held for a taker now, oldest first.
	Waiting() []Offer
}

// Offer is a run that waits to be handed out, with what a taker matches
// it on.
type Offer struct {
	Run string
	// Seq is the run's place in the queue: lower goes first.
	Seq int64
	// Backend is the sandbox backend the run needs.
	Backend string
	// Labels must all be among the taker's labels.
	Labels map[string]string
	// Sealed says the run needs values that reach a remote taker sealed
	// to its key (internal/seal): a taker without one cannot have it.
	Sealed bool
	// Agent is the agent profile whose CLI the taker runs ("": none, the
	// built-in agent or an agent command): a taker without it on its
	// PATH cannot have it.
	Agent string
	// Command is an agent command run's command: the server's own worker
	// takes it only with the command's program on its PATH. An agent host
	// is not asked (it names no programs); one without it fails the run
	// at its start.
	Command string
}

// Queued is one queueing of a run: its id and its update time then.
type Queued struct {
	ID string
	At time.Time
}

// Check reads run id and reports whether it still waits to be handed out
// (ok), and what a taker matches it on. An error leaves the run to be
// offered again.
type Check func(ctx context.Context, id string) (o Offer, ok bool, err error)
