package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
)

type listOptions struct {
	Statuses []string // as given: names, possibly comma-separated
	Repo     string   // as given: any directory inside the repository
	Limit    int      // at most this many (newest first); 0 = all
	Since    string   // a duration (24h) or a date/time
	Agent    string   // profile name, "command" or "builtin"
	Verdict  string   // accept, reject or none
	Quiet    bool     // ids only
	Now      time.Time

	states []run.State // parsed by Validate
	since  time.Time
}

// Validate parses the filters.
func (o *listOptions) Validate() error {
	o.states = nil
	if o.Limit < 0 {
		return catalog.Usage.New("--limit %d: give a number of runs (0 = all)", o.Limit)
	}
	switch o.Verdict {
	case "", "accept", "reject", "none":
	default:
		return catalog.BadVerdict.New("--verdict %q: use accept, reject or none", o.Verdict)
	}
	if o.Since != "" {
		now := o.Now
		if now.IsZero() {
			now = time.Now()
		}
		t, ok := parseSince(o.Since, now)
		if !ok {
			return catalog.BadDuration.New("--since %q: give a duration (90m, 24h, 7d) or a date (2026-12-01, 2026-12-01T15:04:05Z)", o.Since)
		}
		o.since = t
	}
	for _, s := range o.Statuses {
		for _, name := range strings.Split(s, ",") {
			st := run.State(strings.ToLower(strings.TrimSpace(name)))
			if !st.Valid() {
				return catalog.BadStatus.New("unknown status %q", name)
			}
			o.states = append(o.states, st)
		}
	}
	return nil
}

func (app *App) newListCmd() *cobra.Command {
	var o listOptions
	c := &cobra.Command{
		Use:   "list [--status S] [--repo DIR] [--agent A] [--verdict V] [--since T] [--limit N] [-q]",
		Short: "List runs, newest first",
		Long: `List runs, newest first: id, status, age, disk use, repository, branch and the
start of the task.

Disk use is what the run's directory holds (records, logs, HOME and the
workspace; an overlay workspace counts only the agent's changes), counted
without following links and within bounds: a figure with ≥ is a floor, and
? means the count was cut short to keep list quick. 'agentrun gc' frees it.

A run whose record is damaged does not hide the others: it is named on stderr
(and in the "broken" array under --json).

  --status S   only runs in these states (repeat, or separate with commas):
               queued, preparing, running, checking, exporting, succeeded,
               failed, cancelled, interrupted
  --repo DIR   only runs of the repository that contains DIR
  --agent A    only runs of this agent: a profile name, command or builtin
  --verdict V  only runs with this verdict: accept, reject, or none (no verdict yet)
  --since T    only runs created after T: a duration back from now (90m, 24h, 7d)
               or a date or time (2026-12-01, 2026-12-01T15:04:05Z)
  --limit N    at most N runs, the newest
  -q           print only the run ids, one per line
`,
		Args: exactArgs(0, "list takes no arguments; filter with --status and --repo"),
		RunE: func(c *cobra.Command, _ []string) error {
			o.Now = time.Now()
			if app.remote != nil {
				if err := o.Validate(); err != nil {
					return err
				}
				return app.remoteList(c.Context(), &o)
			}
			return runList(c.Context(), &o, app)
		},
	}
	c.Flags().StringSliceVar(&o.Statuses, "status", nil, "only runs in these states")
	c.Flags().StringVar(&o.Repo, "repo", "", "only runs of the repository containing `DIR`")
	c.Flags().IntVar(&o.Limit, "limit", 0, "at most this many runs, the newest (0 = all)")
	c.Flags().StringVar(&o.Since, "since", "", "only runs created after this duration ago or date")
	c.Flags().StringVar(&o.Agent, "agent", "", "only runs of this agent")
	c.Flags().StringVar(&o.Verdict, "verdict", "", "only runs with this verdict: accept, reject or none")
	c.Flags().BoolVarP(&o.Quiet, "quiet", "q", false, "print only the run ids")
	return c
}

// listItem is one run in `list --json` (documented in the README).
type listItem struct {
	ID         string       `json:"id"`
	Status     run.State    `json:"status"`
	Reason     run.Reason   `json:"reason,omitempty"`
	CreatedAt  time.Time    `json:"created_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
	Repo       string       `json:"repo"`
	Branch     string       `json:"branch"`
	Commit     string       `json:"commit,omitempty"`
	Agent      string       `json:"agent"`
	Attempts   int          `json:"attempts"`
	Verdict    *run.Verdict `json:"verdict,omitempty"` // as in result and status
	Task       string       `json:"task"`
	// Usage is the run's model use: tokens, requests, estimated cost,
	// per model (absent when the run used no model).
	Usage *run.Usage `json:"usage,omitempty"`
	// SubmittedBy is the team server's user who submitted the run.
	SubmittedBy *run.Submitter `json:"submitted_by,omitempty"`
	// Disk is what the run takes on disk (absent when counting it would
	// have taken too long: see runDisk).
	Disk *runDisk `json:"disk,omitempty"`
}

type listOutput struct {
	Runs   []listItem   `json:"runs"`
	Broken []run.Broken `json:"broken"`
}

func runList(ctx context.Context, o *listOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	var f run.Filter
	repoGone := false
	if o.Repo != "" {
		// A repository that is gone may still have runs (recorded by its
		// path); with none, the path is a mistake.
		if fi, err := os.Stat(o.Repo); err != nil || !fi.IsDir() {
			repoGone = true
		}
		f.Repo = repoTop(o.Repo)
	}
	// The state filter applies after reconcile: a "running" run whose
	// supervisor died is listed as interrupted.
	runs, broken, err := env.Store.List(ctx, f)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	out := listOutput{Runs: []listItem{}, Broken: broken}
	if out.Broken == nil {
		out.Broken = []run.Broken{}
	}
	var shown []*run.Run
	disk := newDiskCounter(env.Layout)
	p, served := server.PrincipalFrom(ctx)
	for _, r := range runs {
		if served && !p.ReadsAll() && !p.Owns(r) {
			// A member of a team server sees only their own runs.
			continue
		}
		r = app.reconcile(ctx, env, r)
		if len(o.states) > 0 && !containsState(o.states, r.State) || !o.matches(r) {
			continue
		}
		if o.Limit > 0 && len(shown) == o.Limit {
			break
		}
		shown = append(shown, r)
		it := toListItem(r)
		if !o.Quiet {
			it.Disk = disk.of(r)
		}
		out.Runs = append(out.Runs, it)
	}
	if repoGone && len(shown) == 0 {
		return catalog.RepoMissing.New("--repo %s is not a directory, and no run was made in it", o.Repo)
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	if o.Quiet {
		for _, r := range shown {
			fmt.Fprintln(app.Stdout, r.ID)
		}
		return nil
	}
	for _, b := range broken {
		app.warn("run %s is damaged and not listed: %s", b.ID, oneLine(b.Err, 0))
	}
	if len(shown) == 0 {
		if len(runs) == 0 && len(o.states) == 0 && o.Repo == "" {
			fmt.Fprintln(app.Stdout, "no runs yet; start one with 'agentrun submit'")
		} else {
			fmt.Fprintln(app.Stdout, "no runs match")
		}
		return nil
	}
	col := app.colour()
	t := table{header: []string{"ID", "STATUS", "AGE", "DISK", "REPO", "BRANCH", "TASK"}, colour: col}
	by := byColumn(&t, shown)
	for i, r := range shown {
		status := string(r.State)
		if r.State.Terminal() && r.Reason != "" && r.Reason != run.ReasonCompleted {
			status += " (" + string(r.Reason) + ")"
		}
		branch := "-"
		if r.Commit != "" || r.Result != nil {
			branch = r.Branch
		}
		t.add(by(r, r.ID, paint(col, stateColour(r.State), status), ago(o.Now, r.CreatedAt), diskCell(out.Runs[i].Disk),
			oneLine(app.tildePath(r.Repo), 40), branch, oneLine(r.Task, 50))...)
	}
	return t.write(app.Stdout)
}

// byColumn adds the column BY (who submitted each run) to a table of a
// team server's runs; the function it returns puts a run's name in its
// cells (unchanged without the column).
func byColumn(t *table, shown []*run.Run) func(r *run.Run, cells ...string) []string {
	if !slices.ContainsFunc(shown, func(r *run.Run) bool { return r.SubmittedBy != nil }) {
		return func(_ *run.Run, cells ...string) []string { return cells }
	}
	t.header = slices.Insert(t.header, 4, "BY")
	return func(r *run.Run, cells ...string) []string {
		name := "-"
		if r.SubmittedBy != nil {
			name = r.SubmittedBy.Name
		}
		return slices.Insert(cells, 4, name)
	}
}

func toListItem(r *run.Run) listItem {
	it := listItem{
		ID: r.ID, Status: r.State, Reason: r.Reason, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
		Repo: r.Repo, Branch: r.Branch, Commit: r.Commit, Agent: r.Agent.Name,
		Attempts: len(r.Attempts), Task: r.Task, Usage: r.Usage, SubmittedBy: r.SubmittedBy,
	}
	if it.Commit == "" && r.Result != nil {
		it.Commit = r.Result.Commit
	}
	it.Verdict = r.Verdict
	return it
}

func containsState(states []run.State, s run.State) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// repoTop turns a directory the user named into the repository top level
// that runs record: absolute, symlinks resolved, and the nearest ancestor
// holding a .git entry. It runs no git (the repository may be gone; the
// runs of a deleted repository can still be listed by its path).
func repoTop(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return abs
		}
	}
}

// matches applies the agent, verdict and since filters.
func (o *listOptions) matches(r *run.Run) bool {
	if o.Agent != "" && r.Agent.Name != o.Agent {
		return false
	}
	switch o.Verdict {
	case "none":
		if r.Verdict != nil {
			return false
		}
	case "accept", "reject":
		if r.Verdict == nil || r.Verdict.Value != o.Verdict {
			return false
		}
	}
	return o.since.IsZero() || r.CreatedAt.After(o.since)
}

// parseSince reads a duration back from now (Go durations, and whole days
// as "7d") or an absolute date or time.
func parseSince(s string, now time.Time) (time.Time, bool) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), true
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err == nil && days >= 0 && fmt.Sprint(days) == n {
			return now.AddDate(0, 0, -days), true
		}
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
