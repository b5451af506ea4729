package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

type resultOptions struct {
	ID    string
	Patch bool // also print the patch
	Now   time.Time
}

func (o *resultOptions) Validate() error { return nil }

func (app *App) newResultCmd() *cobra.Command {
	var o resultOptions
	c := &cobra.Command{
		Use:   "result ID [--patch]",
		Short: "Show what a finished run produced",
		Long: `Show what a finished run produced: status and reason, the branch and commit,
the diffstat, the checks of the last attempt, durations, the model's token usage
and cost, and the workspace entries that export refused (with why).

  --patch   also print the patch (under --json: the "patch_text" field)

A run still in progress is an error (not_finished); follow it with
'agentrun logs -f ID'.
`,
		Args: exactArgs(1, "result needs one run ID"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ID, o.Now = args[0], time.Now()
			if app.remote != nil {
				return app.remoteResult(c.Context(), &o)
			}
			return runResult(c.Context(), &o, app)
		},
	}
	c.Flags().BoolVar(&o.Patch, "patch", false, "also print the patch")
	return c
}

// resultOutput is `result --json` (documented in the README). Its first
// fields match `submit --json`.
type resultOutput struct {
	ID      string     `json:"id"`
	Status  run.State  `json:"status"`
	Reason  run.Reason `json:"reason,omitempty"`
	Message string     `json:"message,omitempty"`
	Branch  string     `json:"branch"` // empty when nothing was exported
	// BranchState is where the branch is in the run's repository now:
	// at_commit (where the export left it), moved (at another commit: the
	// user committed on it, or reset it), deleted; absent when nothing was
	// exported or the repository cannot be read.
	BranchState  string            `json:"branch_state,omitempty"`
	Commit       string            `json:"commit"`
	Patch        string            `json:"patch"` // path of result.patch; empty when none
	RunDir       string            `json:"run_dir"`
	FilesChanged int               `json:"files_changed"`
	Insertions   int               `json:"insertions"`
	Deletions    int               `json:"deletions"`
	Diffstat     string            `json:"diffstat,omitempty"`
	Checks       []run.CheckResult `json:"checks"` // of the last attempt
	Attempts     []attemptResult   `json:"attempts"`
	Duration     run.Duration      `json:"duration"` // started to finished; 0 if it never started
	Usage        *run.Usage        `json:"usage,omitempty"`
	Refused      []run.Refusal     `json:"refused"`
	Verdict      *run.Verdict      `json:"verdict,omitempty"`
	// Network says when denied or failed connections may be why an
	// attempt or check failed.
	Network *networkHint `json:"network,omitempty"`
	// Model says when the model server refused the agent's requests or
	// could not be reached during the last attempt.
	Model     *modelHint `json:"model,omitempty"`
	PatchText *string    `json:"patch_text,omitempty"` // with --patch
}

type attemptResult struct {
	N        int          `json:"n"`
	Outcome  run.Reason   `json:"outcome,omitempty"`
	ExitCode *int         `json:"exit_code,omitempty"`
	Duration run.Duration `json:"duration"`
}

func runResult(ctx context.Context, o *resultOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, r, err := app.lookupEnded(ctx, o.ID, "follow it with 'agentrun logs -f %s', then ask again")
	if err != nil {
		return err
	}
	out := resultOutput{
		ID: r.ID, Status: r.State, Reason: r.Reason, Message: r.Message,
		RunDir: env.Layout.RunDir(r.ID), Checks: []run.CheckResult{},
		Attempts: []attemptResult{}, Usage: r.Usage, Refused: []run.Refusal{}, Verdict: r.Verdict,
	}
	var tip string
	if c := resultCommit(r); c != "" {
		out.Branch, out.Commit = r.Branch, c
		out.BranchState, tip = branchState(ctx, r.Repo, r.Branch, c)
	}
	patchPath := env.Layout.Patch(r.ID)
	if st, err := os.Stat(patchPath); err == nil && st.Size() > 0 {
		out.Patch = patchPath
	}
	if res := r.Result; res != nil {
		out.FilesChanged, out.Insertions, out.Deletions = res.FilesChanged, res.Insertions, res.Deletions
		out.Diffstat = res.Diffstat
		if res.Refused != nil {
			out.Refused = res.Refused
		}
	}
	if a := r.LastAttempt(); a != nil && a.Checks != nil {
		out.Checks = a.Checks
	}
	for _, a := range r.Attempts {
		ar := attemptResult{N: a.N, Outcome: a.Outcome, ExitCode: a.ExitCode}
		if a.FinishedAt != nil {
			ar.Duration = run.Duration(a.FinishedAt.Sub(a.StartedAt))
		}
		out.Attempts = append(out.Attempts, ar)
	}
	if d, ok := runDuration(o.Now, r); ok {
		out.Duration = run.Duration(d)
	}
	out.Network, out.Model = app.failureHints(ctx, env, r, nil)
	if app.JSON {
		if o.Patch {
			text, err := readPatch(patchPath)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			out.PatchText = &text
		}
		return writeJSON(app.Stdout, out)
	}
	if err := app.printResult(r, &out, tip); err != nil {
		return err
	}
	if o.Patch && out.Patch != "" {
		fmt.Fprintln(app.Stdout)
		return app.copyPatch(patchPath)
	}
	return nil
}

// Where a run's branch is now (resultOutput.BranchState).
const (
	branchAtCommit = "at_commit"
	branchMoved    = "moved"
	branchDeleted  = "deleted"
)

// branchState reads where branch is in the repository repo: its state
// (resultOutput.BranchState) against the run's commit, and its tip when
// it moved; "" when the repository cannot be read.
func branchState(ctx context.Context, repo, branch, commit string) (state, tip string) {
	rp, err := workspace.OpenRepo(ctx, repo)
	if err != nil {
		return "", ""
	}
	tip, ok, err := rp.BranchTip(ctx, branch)
	switch {
	case err != nil:
		return "", ""
	case !ok:
		return branchDeleted, ""
	case tip == commit:
		return branchAtCommit, tip
	}
	return branchMoved, tip
}

// branchLine is the branch as result shows it: with what became of it
// since the export when it moved or was deleted.
func branchLine(out *resultOutput, tip string) string {
	switch out.BranchState {
	case branchMoved:
		return fmt.Sprintf("%s (moved since the export: now at %s)", out.Branch, shortCommit(tip))
	case branchDeleted:
		return fmt.Sprintf("%s (deleted: 'git branch %s %s' brings it back while git keeps the commit; the patch stays here)",
			out.Branch, out.Branch, shortCommit(out.Commit))
	}
	return out.Branch
}

func (app *App) printResult(r *run.Run, out *resultOutput, tip string) error {
	col := app.colour()
	var f fields
	f.add("run", r.ID)
	f.add("status", stateLine(col, r))
	if out.Commit != "" {
		f.add("branch", branchLine(out, tip))
		f.add("commit", out.Commit)
	} else {
		f.add("branch", "none (nothing was exported)")
	}
	if out.Patch != "" {
		f.add("patch", out.Patch)
	}
	if out.FilesChanged > 0 {
		f.add("changes", changesLine(out.FilesChanged, out.Insertions, out.Deletions))
	}
	var checks []string
	for _, c := range out.Checks {
		checks = append(checks, oneLine(c.Name, 30)+" "+checkMark(col, c))
	}
	f.add("checks", strings.Join(checks, ", "))
	if len(out.Attempts) > 0 {
		var parts []string
		for _, a := range out.Attempts {
			parts = append(parts, fmt.Sprintf("#%d %s", a.N, humanDuration(a.Duration.D())))
		}
		f.add("attempts", strings.Join(parts, ", "))
	}
	if out.Duration > 0 {
		f.add("duration", humanDuration(out.Duration.D()))
	}
	if out.Usage != nil {
		f.add("tokens", usageLine(out.Usage))
	}
	if out.Verdict != nil {
		f.add("verdict", verdictLine(out.Verdict))
	}
	if out.Network != nil {
		f.add("network", oneLine(out.Network.Hint, 0))
	}
	if out.Model != nil {
		f.add("model", oneLine(out.Model.Hint, 0))
	}
	if err := f.write(app.Stdout); err != nil {
		return err
	}
	if out.Diffstat != "" {
		fmt.Fprintln(app.Stdout)
		for _, line := range strings.Split(strings.TrimRight(out.Diffstat, "\n"), "\n") {
			fmt.Fprintln(app.Stdout, oneLine(line, 0))
		}
	}
	if len(out.Refused) > 0 {
		fmt.Fprintf(app.Stdout, "\nrefused by export (%d, not in the result):\n", len(out.Refused))
		var t table
		for _, x := range out.Refused {
			t.add("  "+oneLine(x.Path, 60), oneLine(x.Reason, 60))
		}
		if err := t.write(app.Stdout); err != nil {
			return err
		}
	}
	for _, c := range out.Checks {
		if !c.Passed && checkName.MatchString(c.Name) {
			fmt.Fprintf(app.Stdout, "\nwhy check %s failed: agentrun logs %s --check %s --attempt %d\n",
				c.Name, r.ID, c.Name, len(r.Attempts))
		}
	}
	if out.Commit != "" {
		// The run's own work: its commit, where the branch no longer is.
		what := out.Branch
		if out.BranchState == branchMoved || out.BranchState == branchDeleted {
			what = shortCommit(out.Commit)
		}
		fmt.Fprintf(app.Stdout, "\nreview: git -C %s log -p %s..%s\n", shellQuote(r.Repo), shortCommit(r.Base), what)
	}
	return nil
}

// readPatch returns the whole patch ("" and fs.ErrNotExist when none).
func readPatch(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// copyPatch streams the patch verbatim (neutralised on a terminal: it
// holds what the agent wrote).
func (app *App) copyPatch(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, done := app.rawOut()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("print patch: %w", err)
	}
	return done()
}

// shellQuote quotes s for a command line a person may paste.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./~+@:=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
