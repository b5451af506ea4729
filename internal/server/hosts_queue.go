package server

// hosts_queue.go: the runs' way through the dispatch queue (internal/queue,
// on River). Every queueing of a run inserts its dispatch job right after
// the state change that queued it (the run store's transaction is its own);
// the sweep at the queue's start inserts the jobs of queued runs that have
// none (a server that stopped between the two), so nothing queued is
// stranded. River's worker asks check whether the run still waits, and
// hands it to a claim that fits it (claimWait) or to the server's worker.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// Enqueue inserts the dispatch job of run id, just queued (by a submit or
// a resume). A failure is logged: the next start's sweep inserts it.
func (h *Hosts) Enqueue(ctx context.Context, id string) {
	r, err := h.Home.Store.Get(ctx, id)
	if err != nil {
		h.log().Error("enqueue", "run", id, "error", err.Error())
		return
	}
	h.enqueue(ctx, r)
}

// enqueue inserts the dispatch job of queued run r.
func (h *Hosts) enqueue(ctx context.Context, r *run.Run) {
	if h.Queue == nil || r.State != run.StateQueued {
		return
	}
	if err := h.Queue.Enqueue(context.WithoutCancel(ctx), queue.Queued{ID: r.ID, At: r.UpdatedAt}); err != nil {
		h.log().Error("enqueue", "run", r.ID, "error", err.Error())
	}
}

// StartQueue starts handing queued runs out, after the sweep: every
// queued run that waits gets its job (one it has already is kept).
func (h *Hosts) StartQueue(ctx context.Context) error {
	if h.Queue == nil {
		return errors.New("the server has no dispatch queue")
	}
	runs, _, err := h.Home.Store.List(ctx, run.Filter{States: []run.State{run.StateQueued}})
	if err != nil {
		return fmt.Errorf("queue sweep: %w", err)
	}
	var qs []queue.Queued
	for _, r := range runs {
		if waits(r) && !h.Remote(ctx, r.ID) {
			qs = append(qs, queue.Queued{ID: r.ID, At: r.UpdatedAt})
		}
	}
	if err := h.Queue.Sweep(ctx, qs); err != nil {
		return fmt.Errorf("queue sweep: %w", err)
	}
	return h.Queue.Start(ctx, h.check)
}

// waits reports whether r waits to be handed out: queued, taken up by no
// supervisor, no cancel asked for.
func waits(r *run.Run) bool { return supervisor.Unclaimed(r) && !r.CancelRequested }

// check is the queue's Check: run id waits if it is queued, unclaimed by
// any host and by any supervisor, and not being cancelled.
func (h *Hosts) check(ctx context.Context, id string) (queue.Offer, bool, error) {
	r, err := h.Home.Store.Get(ctx, id)
	if errors.Is(err, run.ErrNotFound) {
		return queue.Offer{}, false, nil
	}
	if err != nil {
		return queue.Offer{}, false, err
	}
	if !waits(r) || h.Remote(ctx, id) {
		return queue.Offer{}, false, nil
	}
	return h.offerOf(r), true, nil
}

func (h *Hosts) offerOf(r *run.Run) queue.Offer {
	o := queue.Offer{Run: r.ID, Seq: r.Seq, Backend: r.Sandbox.Backend, Labels: r.Labels, Sealed: h.needsSeal(r), Agent: profileOf(r)}
	if r.Agent.Name == agent.CommandName {
		o.Command = r.Agent.Command
	}
	return o
}

// Waiting says why queued run r waits if no taker could ever have it: no
// enrolled host, revoked ones aside, has its sandbox backend, all its
// labels and its agent's CLI, and the server's own worker (which has no
// labels) does not take it. It is "" for a run some taker could have.
func (h *Hosts) Waiting(ctx context.Context, r *run.Run) string {
	if !waits(r) || h.Remote(ctx, r.ID) {
		return ""
	}
	o := h.offerOf(r)
	if h.LocalWorker && LocalTakes(o, h.Agents, h.Getenv) {
		return ""
	}
	hosts, err := h.List(ctx)
	if err != nil {
		return ""
	}
	fitting := func(o queue.Offer) bool {
		return slices.ContainsFunc(hosts, func(hs *Host) bool {
			return !hs.Revoked && fits(hs, hs.Backends, hs.Agents, o)
		})
	}
	if fitting(o) {
		return ""
	}
	if o.Sealed && fitting(queue.Offer{Backend: o.Backend, Labels: o.Labels, Agent: o.Agent}) {
		return noSealKey
	}
	if o.Agent != "" && fitting(queue.Offer{Backend: o.Backend, Labels: o.Labels, Sealed: o.Sealed}) {
		return "no agent host that can execute it has the " + o.Agent + " CLI on its PATH: install it on one (its next claim says so)"
	}
	need := "the " + o.Backend + " sandbox"
	if len(o.Labels) > 0 {
		var ls []string
		for k, v := range o.Labels {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		need += " and the labels " + strings.Join(ls, ", ")
	}
	return "no enrolled agent host can execute it: none has " + need
}
