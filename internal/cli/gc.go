package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

type gcOptions struct {
	OlderThan string // a duration (24h, 7d): only runs finished before then
	Keep      int    // keep the workspaces of the N most recently finished runs
	DryRun    bool
	Now       time.Time

	before time.Time // parsed by Validate (zero: no age bound)
}

// Validate parses --older-than and checks --keep.
func (o *gcOptions) Validate() error {
	if o.Keep < 0 {
		return catalog.Usage.New("--keep %d: give a number of runs (0 = none)", o.Keep)
	}
	o.before = time.Time{}
	if o.OlderThan != "" {
		t, ok := parseSince(o.OlderThan, o.Now)
		if !ok {
			return catalog.BadDuration.New("--older-than %q: give a duration back from now (90m, 24h, 7d) or a date (2026-12-01)", o.OlderThan)
		}
		o.before = t
	}
	return nil
}

func (app *App) newGCCmd() *cobra.Command {
	var o gcOptions
	c := &cobra.Command{
		Use:   "gc [--older-than D] [--keep N] [--dry-run]",
		Short: "Free disk: remove finished runs' workspaces and unused cached layers",
		Long: `Free disk space. First, the workspaces of finished runs (succeeded, failed
or cancelled) are removed, with their sandbox HOME: their records, logs,
patches and branches stay, and status, list, result and diff go on working;
such a run can no longer be resumed. Interrupted runs and runs in progress are
never touched.

  --older-than D  only runs that finished more than D ago (90m, 24h, 7d), or
                  before a date (2026-12-01)
  --keep N        keep the workspaces of the N most recently finished runs
  --dry-run       say what would be removed, remove nothing

Then the layer cache (one checkout per base commit, shared by the overlay
workspaces on it, and the setup snapshots: 'agentrun setup --status') is
brought within its budget: layers no workspace
uses any more are removed, the least recently used first, until the cache
holds no more than cache_budget (config.toml or AGENTRUN_CACHE_BUDGET;
default 20G). A layer in use is never removed.

Under --json: {"dry_run", "runs": [{"id", "status", "bytes"}], "layers":
[{"key", "commit", "bytes", "files", "made", "last_used", "workspaces"}],
"freed_bytes", "cache_bytes", "cache_budget"}.
`,
		Args: exactArgs(0, "gc takes no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			o.Now = time.Now()
			return runGC(c.Context(), &o, app)
		},
	}
	c.Flags().StringVar(&o.OlderThan, "older-than", "", "only runs that finished more than this long ago (24h, 7d)")
	c.Flags().IntVar(&o.Keep, "keep", 0, "keep the workspaces of the N most recently finished runs")
	c.Flags().BoolVar(&o.DryRun, "dry-run", false, "say what would be removed, remove nothing")
	return c
}

// gcRun is a run whose workspace gc removed (or would).
type gcRun struct {
	ID     string    `json:"id"`
	Status run.State `json:"status"`
	Bytes  int64     `json:"bytes"` // what removing it frees
}

type gcOutput struct {
	DryRun      bool                    `json:"dry_run"`
	Runs        []gcRun                 `json:"runs"`
	Layers      []workspace.CachedLayer `json:"layers"`
	FreedBytes  int64                   `json:"freed_bytes"`
	CacheBytes  int64                   `json:"cache_bytes"` // what the layer cache holds after
	CacheBudget int64                   `json:"cache_budget"`
}

// gcParts are what gc removes of a finished run.
func gcParts(env *Env, id string) []string {
	l := env.Layout
	return []string{l.Workspace(id), l.WorkspaceState(id), l.SandboxHome(id), l.SandboxState(id)}
}

func runGC(ctx context.Context, o *gcOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	if env.settingsErr != nil {
		return env.settingsErr
	}
	out := gcOutput{DryRun: o.DryRun, Runs: []gcRun{}, Layers: []workspace.CachedLayer{}, CacheBudget: env.Settings.CacheBudget}
	gone := map[string]bool{}
	for _, r := range app.gcCandidates(ctx, env, o) {
		g, ok, err := app.gcRun(ctx, env, r.ID, o.DryRun)
		if err != nil {
			return err
		}
		if ok {
			out.Runs = append(out.Runs, g)
			out.FreedBytes += g.Bytes
			gone[env.Layout.WorkspaceState(r.ID)] = true
		}
	}
	cache := workspace.NewLayerCache(env.Layout.LayerCache())
	removed, total, err := cache.Collect(ctx, workspace.CollectOptions{Budget: out.CacheBudget, DryRun: o.DryRun, Gone: gone})
	if err != nil {
		return fmt.Errorf("collect the layer cache: %w", err)
	}
	out.Layers = append(out.Layers, removed...)
	out.CacheBytes = total
	for _, l := range removed {
		out.FreedBytes += l.Bytes
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	return app.printGC(out)
}

// gcCandidates are the finished runs whose workspaces --older-than and
// --keep let go, newest first.
func (app *App) gcCandidates(ctx context.Context, env *Env, o *gcOptions) []*run.Run {
	runs, _, err := env.Store.List(ctx, run.Filter{})
	if err != nil {
		return nil
	}
	var done []*run.Run
	for _, r := range runs {
		r = app.reconcile(ctx, env, r)
		if finished(r.State) {
			done = append(done, r)
		}
	}
	slices.SortStableFunc(done, func(a, b *run.Run) int { return finishedAt(b).Compare(finishedAt(a)) })
	var out []*run.Run
	for i, r := range done {
		if i < o.Keep || (!o.before.IsZero() && !finishedAt(r).Before(o.before)) {
			continue
		}
		if hasAny(gcParts(env, r.ID)) {
			out = append(out, r)
		}
	}
	return out
}

// finishedAt is when r finished (or was last changed).
func finishedAt(r *run.Run) time.Time {
	if r.FinishedAt != nil {
		return *r.FinishedAt
	}
	return r.UpdatedAt
}

func hasAny(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	return false
}

// gcRun removes one finished run's workspace and HOME, holding its
// supervisor lock (not waited for) so that no resume starts on it
// meanwhile. ok is false when the run is not, or no longer, one gc
// removes. The marker goes first: a gc cut short leaves a run that says
// its workspace is gone rather than one that looks resumable.
func (app *App) gcRun(ctx context.Context, env *Env, id string, dryRun bool) (g gcRun, ok bool, err error) {
	lease, err := env.Coord.Acquire(ctx, id, 0)
	if err != nil {
		return g, false, nil // a supervisor has it: not finished after all
	}
	defer lease.Release()
	r, err := env.Store.Get(ctx, id)
	if err != nil || !finished(r.State) {
		return g, false, nil
	}
	g = gcRun{ID: id, Status: r.State}
	parts := gcParts(env, id)
	for _, p := range parts {
		n, _, _ := workspace.DiskUse(p, 0)
		g.Bytes += n
	}
	if dryRun {
		return g, true, nil
	}
	if err := os.WriteFile(env.Layout.WorkspaceRemoved(id), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return g, false, fmt.Errorf("gc %s: %w", id, err)
	}
	for _, p := range parts {
		if err := workspace.RemoveTree(p); err != nil {
			return g, false, fmt.Errorf("gc %s: %w", id, err)
		}
	}
	_, _ = env.Store.AppendEvent(ctx, id, run.NewEvent(run.EventWarning, "agentrun gc removed the workspace and HOME; the record, logs, patch and branch are kept", map[string]any{"bytes": g.Bytes}))
	return g, true, nil
}

func (app *App) printGC(out gcOutput) error {
	verb := "removed"
	if out.DryRun {
		verb = "would remove"
	}
	var t table
	for _, r := range out.Runs {
		t.add(verb, "workspace of "+r.ID, string(r.Status), humanBytes(r.Bytes))
	}
	for _, l := range out.Layers {
		t.add(verb, "layer "+shortCommit(l.Commit), "unused since "+l.LastUsed.Local().Format(localTime), humanBytes(l.Bytes))
	}
	if len(t.rows) > 0 {
		if err := t.write(app.Stdout); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(app.Stdout, "nothing to remove")
	}
	freed := "freed"
	if out.DryRun {
		freed = "would free"
	}
	_, err := fmt.Fprintf(app.Stdout, "%s %s; the layer cache holds %s of its %s budget\n", freed, humanBytes(out.FreedBytes), humanBytes(out.CacheBytes), humanBytes(out.CacheBudget))
	return err
}
