package cli

// bench_report.go holds bench's subcommands: summarize, compare, list and
// check, and the tables they and bench print.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/bench"
	"github.com/agentrun/agentrun/internal/catalog"
)

type benchSummarizeOptions struct {
	File string
	K    int
	HTML string
}

func (app *App) newBenchSummarizeCmd() *cobra.Command {
	o := &benchSummarizeOptions{}
	c := &cobra.Command{
		Use:   "summarize FILE [--html OUT] [--k K]",
		Short: "Per-task and per-model tables of a bench's results",
		Long: `Print the per-agent/model and per-task tables of a results file: runs, pass
rate, pass@k, gamed and error counts, mean tokens, mean cost, median wall
time, the harness's nudges and failures. Runs of status error are counted
apart and left out of every other number. pass@k is the unbiased estimate
from each agent/model's runs of each task (k defaults to the most runs any
pair has), averaged over the group.

--html OUT also writes one self-contained page (inline SVG, nothing fetched):
pass rate against mean cost and against median wall time, a point per
agent/model, and the tables.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.File = args[0]
			if o.K < 0 {
				return catalog.Usage.New("--k must be at least 1")
			}
			return app.runBenchSummarize(o)
		},
	}
	c.Flags().IntVar(&o.K, "k", 0, "the k of pass@k (default: the most runs of one agent/model on one task)")
	c.Flags().StringVar(&o.HTML, "html", "", "also write the page of plots and tables to OUT")
	return c
}

func (app *App) runBenchSummarize(o *benchSummarizeOptions) error {
	h, results, err := bench.ReadFile(o.File)
	if err != nil {
		return err
	}
	s := bench.Summarize(h, results, o.K)
	s.File = o.File
	if o.HTML != "" {
		if err := writeHTMLFile(o.HTML, s); err != nil {
			return err
		}
		s.HTML = o.HTML
		if !app.JSON {
			fmt.Fprintf(app.Stderr, "wrote %s\n", o.HTML)
		}
	}
	return app.printSummary(s)
}

// writeHTMLFile writes the page to a temporary file beside path, then
// renames it: a reader never sees half a page.
func writeHTMLFile(path string, s bench.Summary) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*.html")
	if err != nil {
		return catalog.BadPath.Wrap(err, "--html %s: %v", path, err).WithFix("name a file in a directory you can write")
	}
	defer os.Remove(tmp.Name())
	if err := bench.WriteHTML(tmp, s, time.Now()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// printSummary prints the summary's tables, or its JSON document.
func (app *App) printSummary(s bench.Summary) error {
	if app.JSON {
		return writeJSON(app.Stdout, s)
	}
	col := app.colour()
	fmt.Fprintf(app.Stdout, "bench %s: %s", s.Bench, plural(s.Runs, "run"))
	if s.File != "" {
		fmt.Fprintf(app.Stdout, ", results in %s", s.File)
	}
	fmt.Fprintln(app.Stdout)
	for _, part := range []struct {
		title  string
		groups []bench.Group
	}{{"agent/model", s.Models}, {"task", s.Tasks}} {
		fmt.Fprintln(app.Stdout)
		t := &table{colour: col, header: []string{part.title, "runs", "pass", fmt.Sprintf("pass@%d", s.K), "gamed", "errors", "tokens", "cost", "wall", "turns", "harness"}}
		for _, g := range part.groups {
			t.add(g.Name, fmt.Sprint(g.Runs), passCell(col, g), pct(g.PassAtK), fmt.Sprint(g.Gamed), fmt.Sprint(g.Errors),
				compactCount(g.MeanTokens), usdCell(g.MeanCostUSD), humanDuration(time.Duration(g.MedianWallMS)*time.Millisecond),
				fmt.Sprintf("%.1f", g.MeanTurns), harnessCell(g.Harness))
		}
		if err := t.write(app.Stdout); err != nil {
			return err
		}
	}
	fmt.Fprintln(app.Stdout, "\ntokens, cost and turns are means per run, wall the median; errors are left out of them and of the pass rates")
	return nil
}

func passCell(col bool, g bench.Group) string {
	s := pct(g.PassRate)
	switch {
	case g.Runs == g.Errors:
		return "-"
	case g.PassRate >= 0.8:
		return paint(col, sgrGreen, s)
	case g.PassRate < 0.5:
		return paint(col, sgrRed, s)
	}
	return s
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

func usdCell(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// harnessCell is "3 nudges, 1 max_turns" (nothing: "-").
func harnessCell(h bench.Harness) string {
	var parts []string
	for _, c := range []struct {
		n    int
		name string
	}{{h.Nudges, "nudges"}, {h.Stalled, "stalled"}, {h.Stuck, "stuck"}, {h.MaxTurns, "max_turns"},
		{h.ContextExhausted, "context_exhausted"}, {h.ModelError, "model_error"}, {h.Timeout, "timeout"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// compactCount is n for people: 950, 12.3k, 4.1M.
func compactCount(n float64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%.0f", n)
	case n < 1e6:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.1fM", n/1e6)
}

type benchCompareOptions struct {
	A, B string
	K    int
}

func (app *App) newBenchCompareCmd() *cobra.Command {
	o := &benchCompareOptions{}
	c := &cobra.Command{
		Use:   "compare A B [--k K]",
		Short: "How one bench's results differ from another's",
		Long: `Compare two results files: per agent/model and per task, the pass rate,
pass@k, mean tokens, mean cost and median wall time of A and of B, and B minus
A. A group only one file has is shown with the other side empty.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.A, o.B = args[0], args[1]
			if o.K < 0 {
				return catalog.Usage.New("--k must be at least 1")
			}
			return app.runBenchCompare(o)
		},
	}
	c.Flags().IntVar(&o.K, "k", 0, "the k of pass@k (default: the most runs of one agent/model on one task, in A and B)")
	return c
}

func (app *App) runBenchCompare(o *benchCompareOptions) error {
	ha, ra, err := bench.ReadFile(o.A)
	if err != nil {
		return err
	}
	hb, rb, err := bench.ReadFile(o.B)
	if err != nil {
		return err
	}
	k := o.K
	if k == 0 {
		k = max(bench.Summarize(ha, ra, 0).K, bench.Summarize(hb, rb, 0).K)
	}
	a, b := bench.Summarize(ha, ra, k), bench.Summarize(hb, rb, k)
	a.File, b.File = o.A, o.B
	cmp := bench.Compare(a, b)
	if app.JSON {
		return writeJSON(app.Stdout, cmp)
	}
	fmt.Fprintf(app.Stdout, "A %s (bench %s, %s)\nB %s (bench %s, %s)\n", o.A, a.Bench, plural(a.Runs, "run"), o.B, b.Bench, plural(b.Runs, "run"))
	for _, part := range []struct {
		title string
		diffs []bench.GroupDiff
	}{{"agent/model", cmp.Models}, {"task", cmp.Tasks}} {
		fmt.Fprintln(app.Stdout)
		if err := compareTable(app.Stdout, app.colour(), part.title, k, part.diffs); err != nil {
			return err
		}
	}
	return nil
}

func compareTable(w io.Writer, col bool, title string, k int, diffs []bench.GroupDiff) error {
	t := &table{colour: col, header: []string{title, "pass A", "pass B", "Δ pass", fmt.Sprintf("pass@%d Δ", k), "tokens A", "tokens B", "cost A", "cost B", "wall A", "wall B"}}
	side := func(g *bench.Group, f func(*bench.Group) string) string {
		if g == nil {
			return "-"
		}
		return f(g)
	}
	passOf := func(g *bench.Group) string { return pct(g.PassRate) }
	tokensOf := func(g *bench.Group) string { return compactCount(g.MeanTokens) }
	costOf := func(g *bench.Group) string { return usdCell(g.MeanCostUSD) }
	wallOf := func(g *bench.Group) string { return humanDuration(time.Duration(g.MedianWallMS) * time.Millisecond) }
	for _, d := range diffs {
		delta, deltaK := "-", "-"
		if d.Delta != nil {
			delta, deltaK = signedPct(col, d.Delta.PassRate), signedPct(col, d.Delta.PassAtK)
		}
		t.add(d.Name, side(d.A, passOf), side(d.B, passOf), delta, deltaK, side(d.A, tokensOf), side(d.B, tokensOf),
			side(d.A, costOf), side(d.B, costOf), side(d.A, wallOf), side(d.B, wallOf))
	}
	return t.write(w)
}

// signedPct is a change of rate in points: +25%, -10%, 0%.
func signedPct(col bool, f float64) string {
	s := fmt.Sprintf("%+.0f%%", 100*f)
	switch {
	case f > 0.005:
		return paint(col, sgrGreen, s)
	case f < -0.005:
		return paint(col, sgrRed, s)
	}
	return "0%"
}

func (app *App) newBenchListCmd() *cobra.Command {
	o := &fixtureOptions{}
	c := &cobra.Command{
		Use:   "list [--fixtures DIR | --builtin-fixtures] [--task NAME]",
		Short: "The fixtures a bench would run",
		Long:  "List the fixtures 'agentrun bench' would run with the same flags: name, language, where each was read, its task's first line.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			fs, err := app.benchFixtures(cmd.Context(), o)
			if err != nil {
				return err
			}
			return app.printFixtures(fs)
		},
	}
	o.flags(c)
	return c
}

// fixtureLine is one fixture in bench list --json.
type fixtureLine struct {
	Name      string   `json:"name"`
	Language  string   `json:"language,omitempty"`
	Source    string   `json:"source"`
	Digest    string   `json:"digest"`
	Task      string   `json:"task"`
	Accept    string   `json:"accept"`
	Protected []string `json:"protected,omitempty"`
	Solution  bool     `json:"solution"`
}

func (app *App) printFixtures(fs []*bench.Fixture) error {
	lines := []fixtureLine{}
	for _, f := range fs {
		lines = append(lines, fixtureLine{Name: f.Name, Language: f.Language, Source: f.Source, Digest: f.Digest, Task: f.Task,
			Accept: f.Accept, Protected: f.AcceptFiles(), Solution: len(f.Solution) > 0 || len(f.Delete) > 0})
	}
	if app.JSON {
		return writeJSON(app.Stdout, map[string]any{"fixtures": lines})
	}
	t := &table{colour: app.colour(), header: []string{"fixture", "language", "source", "task"}}
	for _, l := range lines {
		first, _, _ := strings.Cut(strings.TrimSpace(l.Task), "\n")
		t.add(l.Name, l.Language, l.Source, oneLine(first, 70))
	}
	return t.write(app.Stdout)
}

func (app *App) newBenchCheckCmd() *cobra.Command {
	o := &fixtureOptions{}
	var sandbox string
	c := &cobra.Command{
		Use:   "check [--fixtures DIR | --builtin-fixtures] [--task NAME] [--sandbox S]",
		Short: "Check fixtures: the acceptance fails on the base and passes on the solution",
		Long: `Check that each fixture measures something: its acceptance must fail on the
base (else every agent passes) and pass on its solution/ (else none can), run
as a bench judges a result: on a fresh checkout, in a fresh sandbox, no
network. No agent runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return app.runBenchCheck(cmd.Context(), o, sandbox)
		},
	}
	o.flags(c)
	c.Flags().StringVar(&sandbox, "sandbox", "", "sandbox backend to run the acceptance in")
	return c
}

func (app *App) runBenchCheck(ctx context.Context, o *fixtureOptions, backend string) error {
	s, err := app.openEnv()
	if err != nil {
		return err
	}
	fs, err := app.benchFixtures(ctx, o)
	if err != nil {
		return err
	}
	settings, err := s.Configured()
	if err != nil {
		return err
	}
	backend = firstNonEmpty(backend, settings.Sandbox, app.Deps.DefaultBackend)
	backends := app.Deps.backends(app.Executable)
	b, ok := backends[backend]
	if !ok {
		return catalog.UnknownSandbox.New("%q", backend)
	}
	if err := b.Preflight(ctx); err != nil {
		if _, ok := catalog.As(err); ok {
			return err
		}
		return catalog.SandboxPreflight.Wrap(err, "%s: %v", backend, err)
	}
	dir, err := os.MkdirTemp("", "agentrun-bench-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	scorer := &bench.Scorer{Backends: backends, Workspaces: app.Deps.Workspaces, Path: app.Getenv("PATH")}
	checks := []bench.Check{}
	bad := false
	for _, f := range fs {
		c, err := bench.CheckFixture(ctx, scorer, f, backend, filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		bad = bad || !c.OK
		checks = append(checks, c)
		if !app.JSON {
			line := fmt.Sprintf("%s: ok", f.Name)
			if !c.OK {
				line = fmt.Sprintf("%s: %s\n  base: %s\n  solution: %s", f.Name, c.Problem, oneLine(c.BaseOutput, 300), oneLine(c.SolutionOutput, 300))
			}
			fmt.Fprintln(app.Stdout, line)
		}
	}
	if app.JSON {
		if err := writeJSON(app.Stdout, map[string]any{"checks": checks}); err != nil {
			return err
		}
	}
	if bad {
		return &reported{exit: catalog.ExitRunFailed}
	}
	return nil
}
