package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
)

type resumeOptions struct {
	ID          string
	Task        string
	Wait        bool
	Follow      bool
	MaxParallel int
	MaxTokens   int64
	MaxCost     float64
	set         func(string) bool
}

func (o *resumeOptions) Validate() error {
	switch {
	case o.ID == "":
		return catalog.Usage.New("give the run id: agentrun resume ID")
	case o.Wait && o.Follow:
		return catalog.ConflictFlags.New("--wait and --follow")
	case o.MaxParallel < 0:
		return catalog.Usage.New("--max-parallel must be at least 1")
	case o.MaxTokens < 0 || o.MaxCost < 0:
		return catalog.BadBudget.New("--max-tokens %d, --max-cost %g", o.MaxTokens, o.MaxCost)
	}
	return nil
}

func (app *App) newResumeCmd() *cobra.Command {
	o := &resumeOptions{}
	c := &cobra.Command{
		Use:   "resume ID [--task TEXT] [--wait | --follow]",
		Short: "Continue an interrupted or failed run with a new attempt",
		Long: `Continue an interrupted or failed run on its own workspace with new attempts
(up to the run's --attempts again; its --timeout counts again from the resume).
The agent is told how the previous attempt and the run ended; --task adds
instructions.

The values of the environment variables the run passes to its agent (its
profile's and those named with --env at submit) were never stored: they are
read again from this command's environment, and so are the model gateway's
keys. A run that ended budget_exceeded continues with a higher --max-cost or
--max-tokens (the run's budget, counting what it has used).

A run that stopped at its export (export_failed: a repository it could not
write to, a full disk, a stale lock; or interrupted there), its last attempt
having passed its checks, is exported again without another attempt, unless
--task asks for more work.`,
	}
	c.RunE = oneRunID(&o.ID, o.Validate, func(ctx context.Context) error {
		o.set = func(n string) bool { return c.Flags().Changed(n) }
		if app.remote != nil {
			return app.remoteResume(ctx, o)
		}
		return app.runResume(ctx, o)
	})
	f := c.Flags()
	f.StringVar(&o.Task, "task", "", "additional instructions for the next attempt")
	f.BoolVar(&o.Wait, "wait", false, "wait for the run to end; exit 1 if it did not succeed")
	f.BoolVar(&o.Follow, "follow", false, "stream events and agent output until the run ends")
	f.IntVar(&o.MaxParallel, "max-parallel", 0, "runs at once on this machine")
	f.Int64Var(&o.MaxTokens, "max-tokens", 0, "the run's new token budget (input + output, all attempts; 0 = no limit)")
	f.Float64Var(&o.MaxCost, "max-cost", 0, "the run's new cost budget in US dollars (all attempts; 0 = no limit)")
	return c
}

func (app *App) runResume(ctx context.Context, o *resumeOptions) error {
	env, r, err := app.readRun(ctx, o.ID)
	if err != nil {
		return err
	}
	if r, err = supervisor.Reconcile(ctx, env.runs(), r); err != nil {
		return err
	}
	if r.State.Active() {
		return catalog.RunActive.New("run %s is %s", r.ID, r.State)
	}
	settings, err := env.Configured()
	if err != nil {
		return err
	}
	maxParallel := settings.MaxParallel
	if o.MaxParallel > 0 {
		maxParallel = o.MaxParallel
	}
	so := supervisor.StartOptions{MaxParallel: maxParallel, Env: app.envValues(r)}
	if o.set != nil && o.set("max-tokens") {
		so.MaxTokens = &o.MaxTokens
	}
	if o.set != nil && o.set("max-cost") {
		so.MaxCost = &o.MaxCost
	}
	if err := app.resumeAllowed(settings, r, so); err != nil {
		return err
	}
	nr, err := supervisor.Resume(ctx, env.runs(), r, o.Task, so)
	if err != nil {
		return err
	}
	if !app.JSON {
		fmt.Fprintf(app.Stderr, "run %s resumed (attempt %d next)\n", nr.ID, len(nr.Attempts)+1)
	}
	return app.afterStart(ctx, env, nr, o.Wait, o.Follow)
}

// resumeAllowed holds the run as it would continue (with the budget the
// resume gives it) to the organization policy in force now, which may
// have changed since the run was submitted.
func (app *App) resumeAllowed(s config.Settings, r *run.Run, so supervisor.StartOptions) error {
	org, err := app.policyInForce(s)
	if err != nil || org == nil {
		return err
	}
	next := *r
	if r.Gateway != nil {
		g := *r.Gateway
		if so.MaxTokens != nil {
			g.MaxTokens = *so.MaxTokens
		}
		if so.MaxCost != nil {
			g.MaxCost = *so.MaxCost
		}
		next.Gateway = &g
	}
	return org.Check(&next)
}
