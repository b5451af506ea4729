package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// Home is one data directory's runs as commands reach them: the run
// store, the coordinator (leases, queue, slots) and the paths.
type Home struct {
	Store  run.Store
	Coord  coord.Coordinator
	Layout layout.Layout
	// Sweepers, by backend name, remove the sandboxes a dead supervisor
	// left behind (a container outlives a supervisor killed with
	// SIGKILL); Reconcile asks the run's backend when it marks the run
	// interrupted. A backend without one leaves nothing.
	Sweepers map[string]sandbox.Sweeper
	// Claimed says that workers claim queued runs through the coordinator
	// (Full mode: a server's workers) instead of a supervisor spawned per
	// run (Lite): Start and Resume queue the run and spawn nothing, and a
	// queued run that no supervisor has taken up yet waits for a worker,
	// however long, instead of counting as dead.
	Claimed bool
	// Remote, when set, reports a run that an agent host executes (Full
	// mode): its liveness is the host's heartbeats, which the server's
	// host registry watches, so Reconcile leaves it alone.
	Remote func(ctx context.Context, id string) bool
}

// spawnGrace is how long a freshly created queued run (never attempted,
// no supervisor recorded) counts as "being spawned" although nobody holds
// its lease yet: submit creates the run record, then takes the lease.
const spawnGrace = 10 * time.Second

// Reconcile is called by every command that reads a run: if the run is in
// an active state but no live supervisor holds its lease, it is marked
// interrupted (compare-and-set; never left "running"), while this process
// holds the lease, so no new supervisor starts in between. It returns the
// run as it now is. It is cheap when the run is terminal.
func Reconcile(ctx context.Context, h Home, r *run.Run) (*run.Run, error) {
	if r == nil || !r.State.Active() || (h.Remote != nil && h.Remote(ctx, r.ID)) {
		return r, nil
	}
	lease, err := h.Coord.Acquire(ctx, r.ID, 0)
	if errors.Is(err, coord.ErrHeld) {
		return r, nil // a live supervisor holds it
	}
	if err != nil {
		return r, fmt.Errorf("reconcile %s: %w", r.ID, err)
	}
	defer lease.Release()
	if AboutToStart(r) || (h.Claimed && Unclaimed(r)) {
		return r, nil // submit is about to start its supervisor, or it waits for a worker
	}
	nr, err := h.Store.Transition(ctx, r.ID, []run.State{r.State}, run.StateInterrupted, run.ReasonInterrupted,
		"the supervisor stopped without finishing the run; resume it with 'agentrun resume "+r.ID+"'")
	if errors.Is(err, run.ErrConflict) {
		// It moved on meanwhile; report it as it is now.
		return h.Store.Get(ctx, r.ID)
	}
	if err != nil {
		return r, fmt.Errorf("reconcile %s: %w", r.ID, err)
	}
	sweep(ctx, h, nr)
	return nr, nil
}

// sweepTimeout bounds removing a dead supervisor's sandbox: a command that
// reads a run must not hang on an engine that does not answer.
const sweepTimeout = 30 * time.Second

// sweep removes the sandboxes r's dead supervisor left in r's backend (its
// agent may still be running there, writing to the workspace), while the
// caller holds r's lease: no new supervisor starts one for r meanwhile,
// and only r's are touched. The outcome goes to r's journal; a sandbox
// that cannot be removed now is left to 'agentrun clean', which sweeps
// again, and does not fail the command that reads r.
func sweep(ctx context.Context, h Home, r *run.Run) {
	sw := h.Sweepers[r.Sandbox.Backend]
	if sw == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepTimeout)
	defer cancel()
	swept, err := sw.Sweep(sctx, h.Layout.SandboxState, func(id string) bool { return id != r.ID })
	var ids []string
	for _, s := range swept {
		ids = append(ids, s.ID)
	}
	var ev run.Event
	switch {
	case err != nil:
		ev = run.NewEvent(run.EventWarning, fmt.Sprintf("could not remove the sandbox the stopped supervisor left (%v); 'agentrun clean' removes it", err),
			map[string]any{"backend": r.Sandbox.Backend, "swept": ids})
	case len(ids) > 0:
		ev = run.NewEvent(run.EventSandbox, fmt.Sprintf("removed the sandbox the stopped supervisor left (%s)", r.Sandbox.Backend),
			map[string]any{"backend": r.Sandbox.Backend, "swept": ids})
	default:
		return
	}
	// The journal is where it is told; if even that fails there is no one
	// to tell, and clean sweeps again.
	_, _ = h.Store.AppendEvent(sctx, r.ID, ev)
}

// Unclaimed reports a queued run that no supervisor has taken up yet (in
// Full mode: one waiting for a worker).
func Unclaimed(r *run.Run) bool { return r.State == run.StateQueued && r.Supervisor == nil }
