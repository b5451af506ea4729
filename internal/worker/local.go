package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// ErrStopping is the cause of a run's context when its worker stops: the
// supervisor then leaves the run interrupted, resumable.
var ErrStopping = errors.New("the worker is stopping")

// Local claims queued runs of Home and runs their supervisors in this
// process, at most Slots at once.
type Local struct {
	// Home is the server's runs; Home.Claimed must be set.
	Home supervisor.Home
	// Deps are the supervisor's seams over Home's store and coordinator.
	Deps supervisor.Deps
	// Slots is how many runs it executes at once; 0 claims none and only
	// reconciles (a server whose runs execute elsewhere still marks the
	// runs of dead hosts interrupted).
	Slots int
	// Poll is how often it looks at the queue (default 20ms); Reconcile
	// how often it looks for active runs that lost their supervisor
	// (default 2s).
	Poll, Reconcile time.Duration
	// Getenv reads the values of the variables a run uses (its agent's
	// and its gateway's); they reach the supervisor, never the store.
	Getenv func(string) string
	// Agents are the agent CLI profiles: with a Queue, it takes only the
	// runs whose profile's CLI is on its PATH (Getenv's; nil: any).
	Agents agent.Catalog
	Log    *slog.Logger
	// Claimed, when set, is told of each run as its supervisor starts,
	// with how long it waited in the queue.
	Claimed func(r *run.Run, waited time.Duration)
	// Queue, when set, hands it its runs (the team server's dispatch
	// queue, which agent hosts take theirs from too); without it, it
	// looks at the store's queued runs every Poll.
	Queue Queue
	// Queued, when set, is told of a run it took whose supervisor ended
	// with the run still waiting (queued, not started): it goes back to
	// the queue.
	Queued func(ctx context.Context, id string)

	mu      sync.Mutex
	freed   chan struct{} // a supervisor ended: a slot is free
	running map[string]bool
	started bool
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	loop    chan struct{}
	nudge   chan struct{}
}

// Queue hands out queued runs (internal/queue).
type Queue interface {
	// Next waits until ctx ends for a run that fits; done says whether
	// the caller took it (its lease).
	Next(ctx context.Context, fits func(queue.Offer) bool) (queue.Offer, func(took bool), error)
}

// Nudge makes it look at the queue now, not at the next poll (a run was
// just queued). It never blocks; before Start it does nothing.
func (w *Local) Nudge() {
	w.mu.Lock()
	ch := w.nudge
	w.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Start reconciles the runs (those a dead server or worker left active are
// marked interrupted once their leases have expired) and starts claiming.
// A second Start does nothing.
func (w *Local) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	w.started = true
	w.running = map[string]bool{}
	ctx, w.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	w.loop = make(chan struct{})
	w.nudge = make(chan struct{}, 1)
	w.freed = make(chan struct{}, 1)
	go w.run(ctx, w.nudge)
	return nil
}

// Stop stops claiming and stops the runs it executes, which end
// interrupted (resumable), and waits for their supervisors until ctx
// ends. Stop before Start, and a second Stop, are fine.
func (w *Local) Stop(ctx context.Context) error {
	w.mu.Lock()
	cancel, loop := w.cancel, w.loop
	w.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel(ErrStopping)
	<-loop
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		if w.Deps.Layers != nil {
			w.Deps.Layers.Wait() // a spare being made is finished, not left half made
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Running is how many runs it executes now.
func (w *Local) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

func (w *Local) run(ctx context.Context, nudge <-chan struct{}) {
	defer close(w.loop)
	if w.Queue != nil && w.Slots > 0 {
		took := make(chan struct{})
		go func() { defer close(took); w.take(ctx) }()
		defer func() { <-took }()
	}
	poll, every := w.Poll, w.Reconcile
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var reconciled time.Time
	for {
		if time.Since(reconciled) >= every {
			w.reconcile(ctx)
			reconciled = time.Now()
		}
		if w.Queue == nil {
			w.claim(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-nudge:
		}
	}
}

// reconcile marks interrupted the active runs that no live supervisor
// holds (a worker that died, a server killed with its runs).
func (w *Local) reconcile(ctx context.Context) {
	// Where runs are claimed, a queued run no supervisor has taken up
	// waits for a taker, and Reconcile would leave it as it is whoever
	// holds its lease: the store's query leaves it out (Taken), before
	// Reconcile would take the lease, which would cost two writes for
	// each queued run every round and refuse a host's claim of it
	// meanwhile. On a server with a long queue they are most of its runs.
	runs, _, err := w.Home.Store.List(ctx, run.Filter{States: []run.State{run.StatePreparing, run.StateRunning,
		run.StateChecking, run.StateExporting, run.StateQueued}, Taken: w.Home.Claimed})
	if err != nil {
		w.logError(ctx, "list active runs", err)
		return
	}
	for _, r := range runs {
		if w.isRunning(r.ID) || supervisor.AboutToStart(r) {
			continue
		}
		if _, err := supervisor.Reconcile(ctx, w.Home, r); err != nil {
			w.logError(ctx, "reconcile", err, "run", r.ID)
		}
	}
}

// take takes the runs the queue hands it while it has free slots, until
// ctx ends.
func (w *Local) take(ctx context.Context) {
	// The server's own worker has no labels: it takes the runs that ask
	// for none, and whose agent CLI or command's program is on its PATH.
	fits := func(o queue.Offer) bool { return server.LocalTakes(o, w.Agents, w.Getenv) }
	for ctx.Err() == nil {
		if w.Running() >= w.Slots {
			select {
			case <-ctx.Done():
			case <-w.freed:
			}
			continue
		}
		o, done, err := w.Queue.Next(ctx, fits)
		if err != nil {
			continue // ctx ended
		}
		done(w.claimOne(ctx, o.Run))
	}
}

// claim takes queued runs, oldest first, while it has free slots.
func (w *Local) claim(ctx context.Context) {
	free := w.Slots - w.Running()
	if free <= 0 {
		return
	}
	runs, _, err := w.Home.Store.List(ctx, run.Filter{States: []run.State{run.StateQueued}})
	if err != nil {
		w.logError(ctx, "list queued runs", err)
		return
	}
	for i := len(runs) - 1; i >= 0 && free > 0 && ctx.Err() == nil; i-- {
		r := runs[i]
		if !supervisor.Unclaimed(r) || r.CancelRequested || w.isRunning(r.ID) {
			continue
		}
		if w.claimOne(ctx, r.ID) {
			free--
		}
	}
}

// claimOne takes run id's lease and, if the run is still queued and
// unclaimed, starts its supervisor.
func (w *Local) claimOne(ctx context.Context, id string) bool {
	lease, err := w.Home.Coord.Acquire(ctx, id, 0)
	if err != nil {
		if !errors.Is(err, coord.ErrHeld) && ctx.Err() == nil {
			w.logError(ctx, "claim", err, "run", id)
		}
		return false
	}
	r, err := w.Home.Store.Get(ctx, id)
	if err != nil || !supervisor.Unclaimed(r) || r.CancelRequested {
		lease.Release()
		return false
	}
	ho, err := supervisor.ResumeHandoff(ctx, w.Home.Store, id)
	if err == nil {
		err = w.Home.Coord.Enqueue(ctx, lease, r.Seq)
	}
	if err != nil {
		lease.Release()
		w.logError(ctx, "claim", err, "run", id)
		return false
	}
	ho.Env = submit.HandoffValues(r, w.Getenv)
	w.mu.Lock()
	w.running[id] = true
	w.mu.Unlock()
	waited := time.Since(r.UpdatedAt)
	if w.Claimed != nil {
		w.Claimed(r, waited)
	}
	w.log().InfoContext(ctx, "run claimed", "run", id, "token", lease.Token(), "queued_for", waited.String())
	w.wg.Add(1)
	go w.supervise(ctx, id, lease, ho)
	return true
}

// supervise runs the supervisor of run id while it holds the lease.
func (w *Local) supervise(ctx context.Context, id string, lease coord.Lease, ho supervisor.Handoff) {
	defer w.wg.Done()
	defer func() {
		w.mu.Lock()
		delete(w.running, id)
		w.mu.Unlock()
		select {
		case w.freed <- struct{}{}:
		default:
		}
	}()
	defer lease.Release()
	deps := w.Deps
	deps.Store = newJournalAhead(deps.Store, id)
	s := &supervisor.Supervisor{Deps: deps, ID: id, MaxParallel: max(w.Slots, 1), Handoff: ho, Lease: lease, InProcess: true}
	err := s.Run(ctx)
	if ja, ok := deps.Store.(*journalAhead); ok {
		ja.drain() // what the supervisor's last write did not carry
	}
	if err != nil {
		w.logError(ctx, "supervise", err, "run", id)
	}
	r, err := w.Home.Store.Get(context.WithoutCancel(ctx), id)
	switch {
	case err != nil:
	case supervisor.Unclaimed(r) && !r.CancelRequested:
		// Its supervisor gave it back before it started (its lease was
		// lost while it waited for a slot): it waits for a taker again.
		lease.Release() // before the queue may hand it out again
		w.log().Info("run queued again", "run", id)
		if w.Queued != nil {
			w.Queued(context.WithoutCancel(ctx), id)
		}
	default:
		w.log().Info("run ended", "run", id, "state", string(r.State), "reason", string(r.Reason))
	}
}

func (w *Local) isRunning(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[id]
}

func (w *Local) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

func (w *Local) logError(ctx context.Context, what string, err error, args ...any) {
	w.log().ErrorContext(context.WithoutCancel(ctx), what, append(args, "error", err.Error())...)
}
