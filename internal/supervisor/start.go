package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// StartOptions say how Start spawns the supervisor.
type StartOptions struct {
	Executable  string
	MaxParallel int
	Env         map[string]string // values of the run's variables (never stored)
	// MaxTokens and MaxCost, when set, replace the run's budget (resume).
	MaxTokens *int64
	MaxCost   *float64
	// Pending, when set, is a supervisor started ahead (Prespawn) that
	// takes the run; if it is gone, a new one is spawned.
	Pending *Pending
}

// Start stores the planned run (queued) and spawns its supervisor. If the
// spawn fails, the run is marked failed so it is not left queued. Where
// workers claim runs (h.Claimed), the queued run is all there is to do.
func Start(ctx context.Context, h Home, r *run.Run, o StartOptions) error {
	st := h.Store
	if err := st.Create(ctx, r); err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	// The run itself is durable (Create): this event is progress.
	_, _ = appendProgress(st)(ctx, r.ID, run.NewEvent(run.EventSubmitted, "submitted", map[string]any{
		"base": r.Base, "agent": r.Agent.Name, "sandbox": r.Sandbox.Backend, "dirty": r.Dirty}))
	if h.Claimed {
		return nil
	}
	return spawnFor(ctx, h, r.ID, r.Seq, o, Handoff{Env: o.Env})
}

func spawnFor(ctx context.Context, h Home, id string, seq int64, o StartOptions, ho Handoff) error {
	lease, err := takeLease(ctx, h.Coord, id, 2*time.Second)
	if err == nil {
		if err = h.Coord.Enqueue(ctx, lease, seq); err != nil {
			lease.Release()
		}
	}
	if err == nil {
		err = spawn(ctx, SpawnOptions{Layout: h.Layout, ID: id, Executable: o.Executable, MaxParallel: o.MaxParallel, Handoff: ho, Lease: lease, Coord: h.Coord}, o.Pending)
	}
	if err != nil {
		_ = h.Coord.Dequeue(context.WithoutCancel(ctx), id, seq)
		_, _ = h.Store.Transition(context.WithoutCancel(ctx), id, []run.State{run.StateQueued}, run.StateFailed, run.ReasonInternal, "the supervisor could not be started: "+err.Error())
		return fmt.Errorf("start supervisor: %w", err)
	}
	return nil
}

// spawn hands so's run to pending, or spawns a supervisor for it when
// there is none or it is gone. Either way the caller's lease is released.
func spawn(ctx context.Context, so SpawnOptions, pending *Pending) error {
	if pending != nil {
		_, err := pending.hand(so)
		if !errors.Is(err, errPendingGone) {
			if err != nil {
				so.Lease.Release()
			}
			return err
		}
	}
	_, err := Spawn(ctx, so)
	return err
}

// exportOnly says whether resuming r, with note, is only its export
// again: r stopped at the export (export_failed; or interrupted, its last
// attempt completed with every check run and passed, so that the export
// was all that was left) and note asks for no more work. Anything else
// gets new attempts.
func exportOnly(r *run.Run, note string) bool {
	a := r.LastAttempt()
	if note != "" || a == nil || a.Outcome != run.ReasonCompleted || len(a.Checks) != len(r.Checks) ||
		(r.Reason != run.ReasonExportFailed && r.Reason != run.ReasonInterrupted) {
		return false
	}
	for _, c := range a.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
}

// endedAs describes how r ended, for the resumed agent.
func endedAs(r *run.Run) string {
	s := string(r.State)
	if r.Reason != "" {
		s += " (" + string(r.Reason) + ")"
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

// Resume queues an interrupted or failed run again and spawns a new
// supervisor that continues it on its own workspace with new attempts.
// note is added to the next prompt. Where workers claim runs (h.Claimed),
// nothing is spawned: the note and how the run ended are journaled (an
// EventResume) for the worker that claims it (ClaimHandoff).
func Resume(ctx context.Context, h Home, r *run.Run, note string, o StartOptions) (*run.Run, error) {
	st, l := h.Store, h.Layout
	if !r.State.Resumable() {
		return nil, catalog.NotResumable.New("run %s is %s", r.ID, r.State)
	}
	if (o.MaxTokens != nil || o.MaxCost != nil) && r.Gateway == nil {
		return nil, catalog.BadBudget.New("run %s has no model gateway to budget", r.ID)
	}
	if r.Reason == run.ReasonBudgetExceeded && r.Gateway != nil {
		g := *r.Gateway
		if o.MaxTokens != nil {
			g.MaxTokens = *o.MaxTokens
		}
		if o.MaxCost != nil {
			g.MaxCost = *o.MaxCost
		}
		if (g.MaxTokens > 0 && r.Usage.Total() >= g.MaxTokens) || (g.MaxCost > 0 && r.Usage != nil && r.Usage.CostUSD >= g.MaxCost) {
			return nil, catalog.BadBudget.New("run %s stopped at its budget (%s); the budget it would resume with is spent too", r.ID, usageLine(r.Usage)).
				WithFix("resume with a higher budget: agentrun resume %s --max-cost N or --max-tokens N (0 = no limit)", r.ID)
		}
	}
	// Take the lease first: from the moment the run is queued again, its
	// supervisor is alive as far as anyone can tell.
	lease, err := takeLease(ctx, h.Coord, r.ID, 2*time.Second)
	if err != nil {
		return nil, catalog.RunActive.New("run %s: %v", r.ID, err)
	}
	ho := Handoff{Note: note, Ended: endedAs(r), ExportOnly: exportOnly(r, note)}
	nr, err := st.Transition(ctx, r.ID, []run.State{run.StateInterrupted, run.StateFailed}, run.StateQueued, run.ReasonNone, "resumed")
	if err != nil {
		lease.Release()
		if errors.Is(err, run.ErrConflict) {
			// Another resume took it (and may have finished it) first.
			return nil, catalog.NotResumable.Wrap(err, "%v", err)
		}
		return nil, fmt.Errorf("resume: %w", err)
	}
	now := time.Now().UTC()
	if _, err := st.Update(ctx, r.ID, func(r *run.Run) error {
		r.CancelRequested, r.Supervisor, r.FinishedAt = false, nil, nil
		if r.Gateway != nil && o.MaxTokens != nil {
			r.Gateway.MaxTokens = *o.MaxTokens
		}
		if r.Gateway != nil && o.MaxCost != nil {
			r.Gateway.MaxCost = *o.MaxCost
		}
		if a := r.LastAttempt(); a != nil && a.FinishedAt == nil {
			a.FinishedAt, a.Outcome = &now, run.ReasonInterrupted
			a.Message = "the supervisor stopped during this attempt"
		}
		return nil
	}); err != nil {
		lease.Release()
		return nil, fmt.Errorf("resume: %w", err)
	}
	if len(nr.Attempts) == 0 {
		// No agent has had the workspace: a supervisor killed while making
		// it may have left it half made. The new supervisor makes it again.
		err = errors.Join(os.RemoveAll(l.Workspace(r.ID)), os.RemoveAll(l.WorkspaceState(r.ID)))
	}
	if err == nil && h.Claimed {
		// The lease was held until the record was complete: no worker
		// claims the run half resumed.
		defer lease.Release()
		_, err = st.AppendEvent(ctx, r.ID, run.NewEvent(run.EventResume, "resumed", ho))
		if err == nil {
			return nr, nil
		}
	} else if err == nil {
		err = h.Coord.Enqueue(ctx, lease, nr.Seq)
	}
	if err == nil && !h.Claimed {
		err = spawn(ctx, SpawnOptions{Layout: l, ID: r.ID, Executable: o.Executable, MaxParallel: o.MaxParallel,
			Handoff: Handoff{Env: o.Env, Note: ho.Note, Ended: ho.Ended, ExportOnly: ho.ExportOnly}, Lease: lease, Coord: h.Coord}, o.Pending)
	} else {
		lease.Release()
	}
	if err != nil {
		_ = h.Coord.Dequeue(context.WithoutCancel(ctx), r.ID, nr.Seq)
		_, _ = st.Transition(context.WithoutCancel(ctx), r.ID, []run.State{run.StateQueued}, run.StateInterrupted, run.ReasonInterrupted, "the supervisor could not be started: "+err.Error())
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	return nr, nil
}

// usageLine is u in a few words.
func usageLine(u *run.Usage) string {
	if u == nil {
		return "no model use recorded"
	}
	return fmt.Sprintf("%d tokens, $%.4f", u.Total(), u.CostUSD)
}
