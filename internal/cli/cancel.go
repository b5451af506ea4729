package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
)

type cancelOptions struct {
	ID     string
	NoWait bool
}

func (o *cancelOptions) Validate() error {
	if o.ID == "" {
		return catalog.Usage.New("give the run id: agentrun cancel ID")
	}
	return nil
}

func (app *App) newCancelCmd() *cobra.Command {
	o := &cancelOptions{}
	c := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run",
		Long: `Cancel a run. A queued run never starts its agent. A running one's agent gets
SIGTERM to its whole process group, SIGKILL after a grace period, and the run
ends cancelled. The command waits for the run to end (unless --no-wait).
Cancelling a run that has already ended changes nothing.`,
		RunE: oneRunID(&o.ID, o.Validate, func(ctx context.Context) error {
			if app.remote != nil {
				return app.remoteCancel(ctx, o)
			}
			return app.runCancel(ctx, o)
		}),
	}
	c.Flags().BoolVar(&o.NoWait, "no-wait", false, "return once the cancel is requested")
	return c
}

// cancelWait bounds how long cancel waits for the run to end.
const cancelWait = 30 * time.Second

func (app *App) runCancel(ctx context.Context, o *cancelOptions) error {
	env, before, err := app.readRun(ctx, o.ID)
	if err != nil {
		return err
	}
	id := before.ID
	r, err := supervisor.Cancel(ctx, env.runs(), id)
	already := before.State.Terminal()
	if errors.Is(err, supervisor.ErrNotRecorded) && r != nil {
		// Nothing runs any more: the cancel has nothing to stop. Say why
		// the record still shows the run active.
		app.warn("run %s has stopped (its supervisor is gone), but its record could not be updated: %v; "+
			"free space, or remove the run with 'agentrun clean %s'", id,
			strings.TrimPrefix(err.Error(), supervisor.ErrNotRecorded.Error()+": "), id)
		err, already = nil, true
	}
	if err != nil {
		return err
	}
	if !o.NoWait && !r.State.Terminal() {
		wctx, cancel := context.WithTimeout(ctx, cancelWait)
		defer cancel()
		if nr, err := supervisor.WaitEnd(wctx, env.runs(), id, 20*time.Millisecond); err == nil {
			r = nr
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	out := cancelOutput{ID: r.ID, Status: r.State, Reason: r.Reason, AlreadyEnded: already}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	app.printCancel(out)
	return nil
}

// printCancel is cancel for people.
func (app *App) printCancel(out cancelOutput) {
	switch {
	case out.AlreadyEnded:
		fmt.Fprintf(app.Stdout, "run %s had already ended: %s\n", out.ID, out.Status)
	case out.Status == run.StateCancelled:
		fmt.Fprintf(app.Stdout, "run %s cancelled\n", out.ID)
	case out.Status.Terminal():
		fmt.Fprintf(app.Stdout, "run %s ended %s before the cancel took effect\n", out.ID, out.Status)
	default:
		fmt.Fprintf(app.Stdout, "cancel requested; run %s is still %s\n", out.ID, out.Status)
	}
}

// cancelOutput is `cancel --json`: id, status, reason first, as submit.
type cancelOutput struct {
	ID     string     `json:"id"`
	Status run.State  `json:"status"`
	Reason run.Reason `json:"reason"`
	// AlreadyEnded: the run had ended before the cancel.
	AlreadyEnded bool `json:"already_ended"`
}
