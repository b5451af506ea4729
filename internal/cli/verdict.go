package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

type verdictOptions struct {
	ID    string
	Value string // accept | reject
	Note  string
	By    string // who records it (the user name from the environment)
	Now   time.Time
}

// Validate checks the verdict value.
func (o *verdictOptions) Validate() error {
	switch o.Value {
	case "accept", "reject":
	default:
		return catalog.BadVerdict.New("%q", o.Value)
	}
	if len(o.Note) > 4096 {
		return catalog.Usage.New("--note is %d bytes; at most 4096", len(o.Note))
	}
	return nil
}

func (app *App) newVerdictCmd() *cobra.Command {
	var o verdictOptions
	c := &cobra.Command{
		Use:   "verdict ID accept|reject [--note TEXT]",
		Short: "Record the reviewer's verdict on a finished run",
		Long: `Record the reviewer's verdict on a finished run: accept or reject, with an
optional note. The verdict is stored in the run record (status and result show
it, list --json carries it) and appended to the run's event journal. A second
verdict replaces the first; both stay in the journal.
`,
		Args: exactArgs(2, "verdict needs a run ID and accept or reject"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ID, o.Value, o.Now = args[0], args[1], time.Now().UTC()
			o.By = app.Getenv("USER")
			if app.remote != nil {
				if err := o.Validate(); err != nil {
					return err
				}
				return app.remoteVerdict(c.Context(), &o)
			}
			return runVerdict(c.Context(), &o, app)
		},
	}
	c.Flags().StringVar(&o.Note, "note", "", "a note for the record (why)")
	return c
}

func runVerdict(ctx context.Context, o *verdictOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, r, err := app.lookupEnded(ctx, o.ID, "wait for it to end ('agentrun logs -f %s'), then record the verdict")
	if err != nil {
		return err
	}
	v := &run.Verdict{Value: o.Value, Note: o.Note, By: o.By, At: o.Now}
	msg := o.Value
	if r.Verdict != nil {
		msg += " (was " + r.Verdict.Value + ")"
	}
	// The journal first, then the record.
	if _, err := env.Store.AppendEvent(ctx, r.ID, run.NewEvent(run.EventVerdict, msg, v)); err != nil {
		return fmt.Errorf("journal verdict: %w", err)
	}
	nr, err := env.Store.Update(ctx, r.ID, func(r *run.Run) error {
		r.Verdict = v
		return nil
	})
	if err != nil {
		return fmt.Errorf("record verdict: %w", err)
	}
	if app.JSON {
		return writeJSON(app.Stdout, map[string]any{"id": nr.ID, "verdict": nr.Verdict})
	}
	app.printVerdict(nr.ID, o.Value, o.Note)
	return nil
}

// printVerdict is verdict for people.
func (app *App) printVerdict(id, value, note string) {
	word := map[string]string{"accept": "accepted", "reject": "rejected"}[value]
	fmt.Fprintf(app.Stdout, "run %s %s", id, word)
	if note != "" {
		fmt.Fprintf(app.Stdout, ": %s", oneLine(strings.TrimSpace(note), 72))
	}
	fmt.Fprintln(app.Stdout)
}
