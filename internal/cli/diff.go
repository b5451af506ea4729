package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
)

type diffOptions struct {
	ID string
}

func (o *diffOptions) Validate() error { return nil }

func (app *App) newDiffCmd() *cobra.Command {
	var o diffOptions
	return &cobra.Command{
		Use:   "diff ID",
		Short: "Print a run's patch",
		Long: `Print the run's patch (result.patch) verbatim, ready for 'git apply' or a pager.
On a terminal, control characters in it are shown, not interpreted; piped or
redirected, the bytes are exactly the file's.

A run that exported nothing has no patch: that is the no_patch error.
Under --json: {"id": ID, "patch": TEXT}.
`,
		Args: exactArgs(1, "diff needs one run ID"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ID = args[0]
			if app.remote != nil {
				return app.remoteDiff(c.Context(), o.ID)
			}
			return runDiff(c.Context(), &o, app)
		},
	}
}

func runDiff(ctx context.Context, o *diffOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, r, err := app.lookupRun(ctx, o.ID)
	if err != nil {
		return err
	}
	path := env.Layout.Patch(r.ID)
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		cause := "run " + r.ID + " is " + string(r.State)
		if r.Reason != "" {
			cause += " (" + string(r.Reason) + ")"
		}
		return catalog.NoPatch.New("%s", cause)
	}
	if app.JSON {
		text, err := readPatch(path)
		if err != nil {
			return err
		}
		return writeJSON(app.Stdout, map[string]string{"id": r.ID, "patch": text})
	}
	return app.copyPatch(path)
}
