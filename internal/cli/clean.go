package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/workspace"
)

type cleanOptions struct {
	ID           string // one run, or
	Finished     bool   // every finished run
	DeleteBranch bool   // also delete agentrun/<id> when it is the run's own
	Force        bool   // delete the branch even if it moved; remove a damaged run
	Branches     bool   // find agentrun/* branches whose run is gone
	Repo         string // the repository --branches looks in
}

// Validate checks that exactly one target is named.
func (o *cleanOptions) Validate() error {
	if o.Branches && (o.ID != "" || o.Finished) {
		return catalog.ConflictFlags.New("--branches with a run ID or --finished (clean the runs first, then their leftover branches)")
	}
	if o.Branches {
		return nil
	}
	if o.ID != "" && o.Finished {
		return catalog.ConflictFlags.New("name a run ID or pass --finished, not both")
	}
	if o.ID == "" && !o.Finished {
		return catalog.NoTarget.New("no run ID and no --finished")
	}
	return nil
}

func (app *App) newCleanCmd() *cobra.Command {
	var o cleanOptions
	c := &cobra.Command{
		Use:   "clean ID | --finished | --branches [--repo DIR] [--delete-branch] [--force]",
		Short: "Remove run directories (and, if asked, their branches)",
		Long: `Remove a run's directory (record, journal, logs, workspace, patch), or with
--finished every run that succeeded, failed or was cancelled. Interrupted runs
are kept by --finished (they can be resumed); clean one by its ID.

A run in progress is never removed: cancel it first. With --delete-branch the
run's branch agentrun/<id> is deleted too, but only while it still points at
the run's own result commit: a branch with other commits on it (you built on
it, or moved it) is kept, and for a single ID that is the branch_ahead error,
unless --force. With an ID, --force also removes a run whose record is damaged.
Without --delete-branch the branches stay, and clean says so.

Every clean also removes the sandboxes that supervisors which died left
behind (the docker backend's containers, by their labels) whose run is gone
or no longer active; nothing else of the engine is touched.

--branches lists the agentrun/* branches of the repository (--repo DIR, default
the current one) whose run is gone; with --delete-branch it deletes them (a
branch some worktree has checked out is kept).

Under --json: {"removed": [{"id", "status", "branch", "branch_deleted",
"branch_kept", "branch_kept_reason"}], "kept": [{"id", "status", "code", "why"}]}
(branch_deleted and branch_kept are booleans); --branches adds "orphans":
[{"branch", "commit", "deleted", "kept_reason"}]; leftover sandboxes removed
are "sandboxes": [{"backend", "id", "run_id"}].
`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return catalog.Usage.New("clean takes one run ID (or --finished), got %d arguments", len(args))
			}
			if len(args) == 1 {
				o.ID = args[0]
			}
			return runClean(c.Context(), &o, app)
		},
	}
	c.Flags().BoolVar(&o.Finished, "finished", false, "clean every succeeded, failed or cancelled run")
	c.Flags().BoolVar(&o.DeleteBranch, "delete-branch", false, "also delete the run's branch if it is still the run's own")
	c.Flags().BoolVar(&o.Force, "force", false, "delete the branch even if it moved; remove a damaged run")
	c.Flags().BoolVar(&o.Branches, "branches", false, "find agentrun/* branches whose run is gone (delete them with --delete-branch)")
	c.Flags().StringVar(&o.Repo, "repo", ".", "the repository --branches looks in")
	return c
}

// cleanRemoved is a run clean removed.
type cleanRemoved struct {
	ID     string    `json:"id"`
	Status run.State `json:"status"`
	// Branch is the run's branch ("" for a damaged record).
	Branch string `json:"branch"`
	// BranchDeleted: --delete-branch deleted Branch with the run.
	BranchDeleted bool `json:"branch_deleted"`
	// BranchKept: --delete-branch was given but Branch was kept, for
	// BranchKeptReason. Both false: not asked, or there was no branch.
	BranchKept       bool   `json:"branch_kept"`
	BranchKeptReason string `json:"branch_kept_reason,omitempty"`
	repo             string // the run's repository (for the human note)
}

// cleanKept is a run clean left in place, and why.
type cleanKept struct {
	ID     string    `json:"id"`
	Status run.State `json:"status,omitempty"`
	Code   string    `json:"code"` // run_active, interrupted, branch_ahead, run_damaged
	Why    string    `json:"why"`
}

type cleanOutput struct {
	Removed []cleanRemoved `json:"removed"`
	Kept    []cleanKept    `json:"kept"`
	// Orphans are agentrun/* branches whose run is gone (--branches).
	Orphans []cleanOrphan `json:"orphans,omitempty"`
	// Sandboxes are sandboxes left by dead supervisors that were removed
	// (a backend's containers whose run is gone or no longer active).
	Sandboxes []cleanSwept `json:"sandboxes,omitempty"`
}

// cleanSwept is one leftover sandbox removed.
type cleanSwept struct {
	Backend string `json:"backend"`
	sandbox.Swept
}

// cleanOrphan is a branch agentrun/<id> with no run <id>.
type cleanOrphan struct {
	Branch     string `json:"branch"`
	Commit     string `json:"commit"`
	Deleted    bool   `json:"deleted"`
	KeptReason string `json:"kept_reason,omitempty"`
}

func runClean(ctx context.Context, o *cleanOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	out := cleanOutput{Removed: []cleanRemoved{}, Kept: []cleanKept{}}
	if o.Branches {
		return app.cleanBranches(ctx, env, o, out)
	}
	if o.ID != "" {
		id, err := env.Store.Resolve(ctx, o.ID)
		if err != nil {
			return err
		}
		rm, kept, err := app.cleanOne(ctx, env, id, o, true)
		if err != nil {
			return err
		}
		if rm != nil {
			out.Removed = append(out.Removed, *rm)
		}
		if kept != nil { // not reached for a single id: kept is an error
			out.Kept = append(out.Kept, *kept)
		}
	} else {
		runs, broken, err := env.Store.List(ctx, run.Filter{})
		if err != nil {
			return fmt.Errorf("list runs: %w", err)
		}
		for _, b := range broken {
			out.Kept = append(out.Kept, cleanKept{ID: b.ID, Code: catalog.RunDamaged.Code,
				Why: "the record is damaged; remove it with 'agentrun clean --force " + b.ID + "'"})
		}
		for _, r := range runs {
			rm, kept, err := app.cleanOne(ctx, env, r.ID, o, false)
			if err != nil {
				return err
			}
			if rm != nil {
				out.Removed = append(out.Removed, *rm)
			}
			if kept != nil {
				out.Kept = append(out.Kept, *kept)
			}
		}
	}
	if out.Sandboxes, err = app.sweepSandboxes(ctx, env); err != nil {
		return err
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	col := app.colour()
	var t table
	for _, rm := range out.Removed {
		note := ""
		switch {
		case rm.BranchDeleted:
			note = "branch " + rm.Branch + " deleted"
		case rm.BranchKept:
			note = "branch kept: " + rm.BranchKeptReason
		case rm.Branch != "" && branchExists(ctx, env, rm):
			note = "branch " + rm.Branch + " kept (add --delete-branch, or later: agentrun clean --branches --delete-branch)"
		}
		t.add(paint(col, sgrGreen, "removed"), rm.ID, string(rm.Status), note)
	}
	for _, k := range out.Kept {
		t.add(paint(col, sgrYellow, "kept"), k.ID, string(k.Status), k.Why)
	}
	for _, s := range out.Sandboxes {
		t.add(paint(col, sgrGreen, "removed"), s.RunID, "", "its leftover "+s.Backend+" sandbox "+shortName(s.ID))
	}
	if len(t.rows) == 0 {
		fmt.Fprintln(app.Stdout, "nothing to clean")
		return nil
	}
	return t.write(app.Stdout)
}

// cleanOne removes one run if it may be removed. For a run named by the
// user (single), a reason to keep it is returned as a catalog error; for
// --finished it is returned as kept.
//
// The run's supervisor lock is held while deciding and removing, so a
// supervisor cannot start on the run (resume) or still be finishing it.
func (app *App) cleanOne(ctx context.Context, env *Env, id string, o *cleanOptions, single bool) (*cleanRemoved, *cleanKept, error) {
	keep := func(r *run.Run, ce *catalog.Error) (*cleanRemoved, *cleanKept, error) {
		if single {
			return nil, nil, ce
		}
		k := &cleanKept{ID: id, Code: ce.Code, Why: ce.Cause}
		if r != nil {
			k.Status = r.State
		}
		return nil, k, nil
	}
	r, err := env.Store.Get(ctx, id)
	if errors.Is(err, run.ErrCorrupt) && single && o.Force {
		r = nil // a damaged record: removed on --force, under the lock
	} else if errors.Is(err, run.ErrCorrupt) {
		ce := catalog.RunDamaged.Wrap(err, "%v", err).WithFix("remove it with 'agentrun clean --force %s'", id)
		return keep(nil, ce)
	} else if err != nil {
		return nil, nil, err
	}
	if r != nil {
		r = stoppedAsInterrupted(env, app.reconcile(ctx, env, r), false)
		if r.State.Active() {
			return keep(r, catalog.RunActive.New("run %s is %s", id, r.State).
				WithFix("cancel it first with 'agentrun cancel %s', or wait for it to end", id))
		}
		if !single && !finished(r.State) {
			return nil, &cleanKept{ID: id, Status: r.State, Code: string(r.State),
				Why: "it can be resumed; clean it by its ID"}, nil
		}
	}
	lease, err := env.Coord.Acquire(ctx, id, supervisorExitWait)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if err != nil {
		return keep(r, catalog.RunActive.New("run %s: its supervisor is still running (%v)", id, err))
	}
	defer lease.Release()
	if r != nil {
		// Reread under the lock: a resume may have started meanwhile.
		if r, err = env.Store.Get(ctx, id); err != nil {
			return nil, nil, err
		}
		if r = stoppedAsInterrupted(env, r, true); r.State.Active() {
			return keep(r, catalog.RunActive.New("run %s is %s", id, r.State))
		}
	}
	rm := &cleanRemoved{ID: id}
	if r != nil {
		rm.repo = r.Repo
	}
	var plan branchPlan
	if r != nil {
		rm.Status, rm.Branch = r.State, r.Branch
		if o.DeleteBranch {
			if plan, err = planBranch(ctx, r, o.Force); err != nil {
				return nil, nil, err
			}
			if plan.ahead {
				return keep(r, catalog.BranchAhead.New("%s", plan.why))
			}
			rm.BranchKept, rm.BranchKeptReason = plan.why != "", plan.why
		}
	}
	if err := env.Store.Delete(ctx, id); err != nil {
		return nil, nil, fmt.Errorf("remove run %s: %w", id, err)
	}
	if plan.branch != "" {
		repo, err := workspace.OpenRepo(ctx, r.Repo)
		if err == nil {
			err = repo.DeleteBranch(ctx, plan.branch, plan.expect)
		}
		if err != nil {
			rm.BranchKept, rm.BranchKeptReason = true, oneLine(err.Error(), 0)
		} else {
			rm.BranchDeleted = true
		}
	}
	return rm, nil, nil
}

// stoppedAsInterrupted is r as interrupted when it is active in its record
// but has stopped: no live supervisor (locked: this process holds the
// supervisor lock) and none about to start. Reconcile records that, except
// when it cannot (a workspace that filled the disk): such a run can still
// be removed.
func stoppedAsInterrupted(env *Env, r *run.Run, locked bool) *run.Run {
	if !r.State.Active() {
		return r
	}
	dead := locked && !supervisor.AboutToStart(r)
	if !locked {
		dead, _ = supervisor.Unsupervised(context.Background(), env.runs(), r)
	}
	if !dead {
		return r
	}
	c := *r
	c.State, c.Reason = run.StateInterrupted, run.ReasonInterrupted
	return &c
}

// finished reports the states clean --finished removes: every terminal
// state but interrupted (which waits for resume).
func finished(s run.State) bool { return s.Terminal() && s != run.StateInterrupted }

// branchPlan is what clean does with a run's branch: delete branch if it
// still points at expect; or keep it, and why.
type branchPlan struct {
	branch, expect string
	why            string // why it is kept (or there is none to delete)
	ahead          bool   // kept because it holds commits not the run's own
}

// planBranch decides about the run's branch: delete it only while its tip
// is the run's own result commit, or whatever its tip with force.
func planBranch(ctx context.Context, r *run.Run, force bool) (branchPlan, error) {
	if r.Branch == "" {
		return branchPlan{}, nil
	}
	repo, err := workspace.OpenRepo(ctx, r.Repo)
	if err != nil {
		if catalog.Has(err, catalog.GitMissing) {
			return branchPlan{}, err
		}
		return branchPlan{why: "repository unavailable: " + oneLine(err.Error(), 0)}, nil
	}
	tip, ok, err := repo.BranchTip(ctx, r.Branch)
	if err != nil {
		return branchPlan{}, fmt.Errorf("read branch %s: %w", r.Branch, err)
	}
	if !ok {
		return branchPlan{}, nil // nothing to delete
	}
	own := resultCommit(r)
	switch {
	case tip == own || force:
		return branchPlan{branch: r.Branch, expect: tip}, nil
	case own == "":
		return branchPlan{ahead: true, why: fmt.Sprintf("branch %s is at %s, but run %s exported no commit",
			r.Branch, shortCommit(tip), r.ID)}, nil
	}
	return branchPlan{ahead: true, why: fmt.Sprintf("branch %s is at %s, not at the run's commit %s",
		r.Branch, shortCommit(tip), shortCommit(own))}, nil
}

// supervisorExitWait is how long clean waits for the supervisor of a run
// that has ended to let go of its lock (it stops the sandbox after the
// final state is recorded).
var supervisorExitWait = 5 * time.Second

// branchExists reports whether a removed run's branch is still there.
func branchExists(ctx context.Context, env *Env, rm cleanRemoved) bool {
	if rm.repo == "" {
		return false
	}
	repo, err := workspace.OpenRepo(ctx, rm.repo)
	if err != nil {
		return false
	}
	_, ok, err := repo.BranchTip(ctx, rm.Branch)
	return err == nil && ok
}

// cleanBranches finds (and with --delete-branch deletes) the agentrun/*
// branches of the repository whose run record is gone.
func (app *App) cleanBranches(ctx context.Context, env *Env, o *cleanOptions, out cleanOutput) error {
	repo, err := workspace.OpenRepo(ctx, o.Repo)
	if err != nil {
		return err
	}
	branches, err := repo.RunBranches(ctx)
	if err != nil {
		return err
	}
	out.Orphans = []cleanOrphan{}
	names := make([]string, 0, len(branches))
	for n := range branches {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		id := strings.TrimPrefix(name, "agentrun/")
		if _, err := env.Store.Get(ctx, id); err == nil || errors.Is(err, run.ErrCorrupt) {
			continue // the run is there (or its record is): not an orphan
		}
		or := cleanOrphan{Branch: name, Commit: branches[name]}
		if o.DeleteBranch {
			if err := repo.DeleteBranch(ctx, name, or.Commit); err != nil {
				or.KeptReason = oneLine(err.Error(), 0)
			} else {
				or.Deleted = true
			}
		}
		out.Orphans = append(out.Orphans, or)
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	if len(out.Orphans) == 0 {
		fmt.Fprintln(app.Stdout, "no agentrun/* branch without its run")
		return nil
	}
	var t table
	for _, or := range out.Orphans {
		what := "orphan"
		switch {
		case or.Deleted:
			what = "deleted"
		case or.KeptReason != "":
			what = "kept: " + or.KeptReason
		}
		t.add(or.Branch, shortCommit(or.Commit), what)
	}
	if err := t.write(app.Stdout); err != nil {
		return err
	}
	if !o.DeleteBranch {
		fmt.Fprintln(app.Stdout, "\ndelete them with: agentrun clean --branches --delete-branch")
	}
	return nil
}

// sweepSandboxes removes, with every backend that can leave sandboxes
// behind, those of runs that are gone or not active (interrupted, ended):
// their supervisor died before it could destroy them.
func (app *App) sweepSandboxes(ctx context.Context, env *Env) ([]cleanSwept, error) {
	active := func(id string) bool {
		r, err := env.Store.Get(ctx, id)
		if err != nil {
			// Gone, or a record we cannot read: only a run that is surely
			// gone loses its sandbox.
			return !errors.Is(err, run.ErrNotFound)
		}
		return !r.State.Terminal()
	}
	var out []cleanSwept
	for _, b := range app.Deps.Backends(app.Executable) {
		sw, ok := b.(sandbox.Sweeper)
		if !ok {
			continue
		}
		removed, err := sw.Sweep(ctx, env.Layout.SandboxState, active)
		for _, s := range removed {
			out = append(out, cleanSwept{Backend: b.Name(), Swept: s})
		}
		if err != nil {
			return out, fmt.Errorf("remove the leftover %s sandboxes: %w", b.Name(), err)
		}
	}
	return out, nil
}

func shortName(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
