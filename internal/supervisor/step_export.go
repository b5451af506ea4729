package supervisor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

// exportStep reads what changed out of the workspace and writes it as a
// commit on the run's branch in the user's repository, plus the patch.
// Nothing may run in the sandbox any more when it runs.
//
// Run scans the workspace (without running anything in it), takes out the
// files included from the user's working tree (journaling a warning for
// each the agent changed), journals a refused event for each entry it
// will not export, and exports the rest.
// The result is recorded with the run's end state in the export's last,
// uncancelled step: once the branch points at the commit, Run journals the
// export event and calls Finish with a context that a cancel does not
// end; the branch moves only if Finish holds, and is moved back if it
// fails (a cancel that came first, a full disk), so it never points at a
// commit the run did not record. A cancel seen before then fails the
// export with ctx's cause. When there is nothing to export (no change, or
// every change refused) the result says NoChanges; Run does not move the
// run's state then, nor on an error.
type exportStep struct {
	// Record (the run record) gives the repository, base, branch, task and export limits.
	Record    *run.Run
	Layout    layout.Layout
	Workspace workspace.Workspace
	// Export is Deps.Export (nil: this build cannot export).
	Export func(ctx context.Context, cs *workspace.ChangeSet, opts workspace.ExportOptions) (*run.ExportResult, error)
	// Force moves a branch an earlier export of the run left (resume).
	Force bool
	// Ident is the author read from the repository's configuration
	// (nil: the run names one; see authorIdentity).
	Ident <-chan [2]string
	// Finish records res with the run's end state (required).
	Finish func(ctx context.Context, res *run.ExportResult) error
	// FinishWithin bounds Finish (0: DefaultRecordWithin).
	FinishWithin time.Duration
	Event        func(run.Event)
}

// exportResult is what the export wrote.
type exportResult struct {
	Result *run.ExportResult
	// NoChanges: nothing was exported; Refused says what was refused.
	NoChanges bool
	Refused   []run.Refusal
}

// Run exports; see exportStep.
func (e *exportStep) Run(ctx context.Context) (exportResult, error) {
	r := e.Record
	if e.Export == nil {
		return exportResult{}, errMissing("export")
	}
	t0 := time.Now()
	cs, err := e.Workspace.Scan(ctx, workspace.Limits{MaxFiles: r.Export.MaxFiles, MaxBytes: r.Export.MaxBytes})
	scanTime := time.Since(t0)
	if err != nil {
		return exportResult{}, fmt.Errorf("scan workspace: %w", err)
	}
	if inc := r.Provenance.Included; len(inc) > 0 {
		// The files included from the user's working tree are never
		// exported; one the agent changed is said so.
		for _, p := range workspace.ChangedIncluded(e.Workspace, inc) {
			e.Event(run.NewEvent(run.EventWarning, p+": the agent changed this file, included from your working tree; it is not exported", map[string]any{"included": p}))
		}
		workspace.DropIncluded(cs, inc)
	}
	for _, ref := range cs.Refused {
		e.Event(run.NewEvent(run.EventRefused, ref.Path+": "+ref.Reason, ref))
	}
	nothing := exportResult{NoChanges: true, Refused: cs.Refused}
	if len(cs.Changes) == 0 {
		return nothing, nil
	}
	opts := workspace.ExportOptions{
		Repo: r.Repo, Base: r.Base, Branch: r.Branch,
		Message:    CommitMessage(r.Task, r.ID),
		AuthorName: r.Export.AuthorName, AuthorEmail: r.Export.AuthorEmail,
		PatchPath: e.Layout.Patch(r.ID),
		Force:     e.Force,
	}
	if e.Ident != nil {
		ident := <-e.Ident
		opts.IdentityRead = true
		if opts.AuthorName == "" {
			opts.AuthorName = ident[0]
		}
		if opts.AuthorEmail == "" {
			opts.AuthorEmail = ident[1]
		}
	}
	t1 := time.Now()
	opts.Record = func(res *run.ExportResult) error {
		exportTime := time.Since(t1)
		if len(res.Refused) == 0 {
			res.Refused = cs.Refused // (an Export may already carry them)
		}
		if err := context.Cause(ctx); err != nil {
			return err // the cancel won: the branch goes back
		}
		e.Event(run.NewEvent(run.EventExport, fmt.Sprintf("exported %d file%s to %s", res.FilesChanged, map[bool]string{true: "", false: "s"}[res.FilesChanged == 1], r.Branch),
			map[string]any{"commit": res.Commit, "files": res.FilesChanged, "refused": len(res.Refused),
				"scan_time": scanTime.String(), "export_time": exportTime.String()}))
		within := e.FinishWithin
		if within <= 0 {
			within = DefaultRecordWithin
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
		defer cancel()
		err := e.Finish(rctx, res)
		if err != nil {
			e.Event(run.NewEvent(run.EventWarning, "the export could not be recorded; branch "+r.Branch+" is left as it was: "+err.Error(), nil))
		}
		return err
	}
	res, err := e.Export(ctx, cs, opts)
	if isNoChanges(err) {
		return nothing, nil
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), "export: ") { // (workspace.Export's say so already)
			err = fmt.Errorf("export: %w", err)
		}
		return exportResult{}, err
	}
	return exportResult{Result: res, Refused: cs.Refused}, nil
}

// authorIdentity starts reading the export's author from the user's
// repository, so that it is known by the time the agent is done; nil when
// the run names the author.
func authorIdentity(ctx context.Context, r *run.Run) <-chan [2]string {
	if r.Export.AuthorName != "" && r.Export.AuthorEmail != "" {
		return nil
	}
	ch := make(chan [2]string, 1)
	go func() {
		name, email := configIdentity(context.WithoutCancel(ctx), r.Repo)
		ch <- [2]string{name, email}
	}()
	return ch
}

// CommitMessage is the result commit's message: the task's first line, a
// blank line, and the Agentrun-Run trailer.
func CommitMessage(task, id string) string {
	first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(task), "\n", 2)[0])
	if len(first) > 200 {
		first = first[:200]
	}
	if first == "" {
		first = "agentrun " + id
	}
	return first + "\n\nAgentrun-Run: " + id + "\n"
}
