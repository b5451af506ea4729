package cli

import (
	"context"
	"fmt"

	"github.com/agentrun/agentrun/internal/run"
)

// toSubmitOutput is r as submit --json prints it.
func toSubmitOutput(env *Env, r *run.Run) submitOutput {
	return submitOutput{ID: r.ID, Status: r.State, Reason: r.Reason, Branch: r.Branch, Commit: r.Commit,
		Patch: r.Patch, RunDir: env.Layout.RunDir(r.ID), Warnings: append([]string{}, r.Warnings...)}
}

// endedLine is the first line of how a waited-for run ended: its state,
// and unless it succeeded, why.
func endedLine(r *run.Run) string {
	line := fmt.Sprintf("run %s %s", r.ID, r.State)
	if r.Reason != "" && r.Reason != run.ReasonCompleted {
		line += " (" + string(r.Reason) + ")"
	}
	if r.Message != "" && r.State != run.StateSucceeded {
		line += ": " + r.Message
	}
	return line
}

// printEnd says how a waited-for run ended; for a failed run, also what
// result would say may be why (the network and model hints).
func (app *App) printEnd(ctx context.Context, env *Env, r *run.Run) {
	fmt.Fprintln(app.Stdout, endedLine(r))
	if r.State == run.StateSucceeded {
		fmt.Fprintf(app.Stdout, "branch %s\ncommit %s\npatch  %s\n", r.Branch, r.Commit, r.Patch)
	}
	network, model := app.failureHints(ctx, env, r, nil)
	if network != nil {
		fmt.Fprintln(app.Stdout, "network: "+oneLine(network.Hint, 0))
	}
	if model != nil {
		fmt.Fprintln(app.Stdout, "model: "+oneLine(model.Hint, 0))
	}
}
