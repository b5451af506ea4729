package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// renderError is the one place that maps an error to its message and exit
// code, as text on stderr or, under --json, as a JSON object on stdout.
func (app *App) renderError(ctx context.Context, err error) int {
	var rep *reported
	if errors.As(err, &rep) {
		return rep.exit
	}
	// Errors of the submit service name request fields; here they are
	// the flags that set them.
	ce := toCatalog(ctx, err).NameFields(flagName)
	if app.JSON && app.ndjson {
		// A stream of JSON lines ends with its error as one more line.
		_ = writeJSONLineCompact(app.Stdout, map[string]any{"error": ce})
		return ce.Exit
	}
	if app.JSON {
		_ = writeJSON(app.Stdout, map[string]any{"error": ce})
		return ce.Exit
	}
	fmt.Fprintf(app.Stderr, "error: %s\n", ce.Error())
	if ce.Fix != "" {
		fmt.Fprintf(app.Stderr, "  fix: %s\n", ce.Fix)
	}
	if ce.Doc != "" {
		fmt.Fprintf(app.Stderr, "  see: %s\n", ce.Doc)
	}
	return ce.Exit
}

// reported is returned by a command that has already printed its outcome
// (e.g. submit --wait of a run that failed) and only sets the exit code.
type reported struct{ exit int }

func (r *reported) Error() string { return fmt.Sprintf("exit status %d", r.exit) }

// toCatalog turns any error into a catalog error.
func toCatalog(ctx context.Context, err error) *catalog.Error {
	if ce, ok := catalog.As(err); ok {
		return ce
	}
	switch {
	case errors.Is(err, run.ErrNotFound):
		return catalog.RunNotFound.Wrap(err, "%s", causeOf(err, run.ErrNotFound))
	case errors.Is(err, run.ErrAmbiguous):
		return catalog.AmbiguousID.Wrap(err, "%s", causeOf(err, run.ErrAmbiguous))
	case errors.Is(err, run.ErrBadID):
		return catalog.BadID.Wrap(err, "%s", causeOf(err, run.ErrBadID))
	case errors.Is(err, run.ErrCorrupt):
		return catalog.RunDamaged.Wrap(err, "%s", causeOf(err, run.ErrCorrupt))
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return catalog.DiskFull.Wrap(err, "%v", err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		e := catalog.Internal.Wrap(err, "interrupted")
		e.Code, e.What, e.Fix, e.Exit = "interrupted", "interrupted", "", catalog.ExitInterrupted
		e.Doc = catalog.DocBase + "#interrupted"
		return e
	}
	return catalog.Internal.Wrap(err, "%v", err)
}

// causeOf is err's message without the sentinel's own text, which the
// catalog entry already says ("run not found: run abc", not "run not
// found: run abc: run not found").
func causeOf(err, sentinel error) string {
	msg, s := err.Error(), sentinel.Error()
	msg = strings.TrimSuffix(msg, ": "+s)
	msg = strings.TrimPrefix(msg, s+": ")
	return msg
}

// usageErr wraps a flag or argument error as a catalog usage error.
func usageErr(err error) error {
	if _, ok := catalog.As(err); ok {
		return err
	}
	return catalog.Usage.Wrap(err, "%v", err)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
