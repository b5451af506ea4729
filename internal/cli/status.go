package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/run"
)

type statusOptions struct {
	ID  string
	Now time.Time
}

func (o *statusOptions) Validate() error { return nil }

func (app *App) newStatusCmd() *cobra.Command {
	var o statusOptions
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show a run: state, reason, attempts, checks, timings, provenance",
		Long: `Show a run: its state and why, the task, repository and base commit, every
attempt with its checks, timings, the result branch, the reviewer's verdict,
and provenance (agentrun version, host, sandbox backend, policy digest, and
which isolation and limits were enforced).

ID is a run id or a unique prefix of one (3 characters or more). A run whose
supervisor died is shown (and recorded) as interrupted; resume it with
'agentrun resume ID'.

Under --json the run record itself is printed (its fields are documented in
the README), with "disk": its disk use (see 'agentrun list --help').
`,
		Args: exactArgs(1, "status needs one run ID"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ID, o.Now = args[0], time.Now()
			if app.remote != nil {
				return app.remoteStatus(c.Context(), o.ID)
			}
			return runStatus(c.Context(), &o, app)
		},
	}
}

// statusOutput is status --json: the run record, its disk use, and on a
// team server why a queued run waits if no agent host could ever take it.
type statusOutput struct {
	*run.Run
	Disk    *runDisk `json:"disk,omitempty"`
	Waiting string   `json:"waiting,omitempty"`
}

func runStatus(ctx context.Context, o *statusOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, r, err := app.lookupRun(ctx, o.ID)
	if err != nil {
		return err
	}
	disk := diskOf(env.Layout, r)
	var waiting string
	if env.Waiting != nil {
		waiting = env.Waiting(ctx, r)
	}
	if app.JSON {
		return writeJSON(app.Stdout, statusOutput{Run: r, Disk: disk, Waiting: waiting})
	}
	evs, err := env.Store.Events(ctx, r.ID, 0)
	var network *networkHint
	var model *modelHint
	if err == nil {
		network, model = app.failureHints(ctx, env, r, evs)
	}
	return app.printStatus(r, disk, waiting, evs, err == nil, hints{network, model}, o.Now)
}

// hints are what printStatus says may be why a failed run failed.
type hints struct {
	network *networkHint
	model   *modelHint
}

// printStatus is status for people, from the record, its disk use and its
// journal (evsRead: the journal could be read).
func (app *App) printStatus(r *run.Run, disk *runDisk, waiting string, evs []run.Event, evsRead bool, hint hints, now time.Time) error {
	phases := ""
	var active time.Duration
	resumes := 0
	if evsRead {
		phases = phaseTimes(evs)
		active, resumes = activeTime(evs, now)
	}
	col := app.colour()
	var f fields
	f.add("run", r.ID)
	f.add("status", stateLine(col, r))
	if waiting != "" {
		f.add("waiting", waiting)
	}
	f.add("task", oneLine(r.Task, 72))
	f.add("repo", repoLine(app.tildePath(r.Repo), r.Subdir))
	if r.SubmittedBy != nil {
		f.add("submitted by", r.SubmittedBy.Name)
	}
	if len(r.Labels) > 0 {
		f.add("labels", labelsLine(r.Labels))
	}
	base := shortCommit(r.Base)
	if r.BaseRef != "" && r.BaseRef != r.Base {
		base = oneLine(r.BaseRef, 40) + " @ " + base
	}
	if r.Dirty {
		base += " (uncommitted changes were not included)"
	}
	f.add("base", base)
	f.add("agent", agentLine(r.Agent))
	if r.Gateway != nil {
		f.add("model", gatewayLine(r))
	}
	f.add("sandbox", sandboxLine(app.Deps, r.Sandbox))
	f.add("disk", diskLine(disk, r.Provenance.Enforced["workspace"]))
	if r.Setup != nil {
		f.add("setup", setupLine(r.Setup))
	}
	if w := workspaceLine(r); w != "" {
		f.add("workspace", w)
	}
	addTimes(&f, r, now, active, resumes)
	if r.Supervisor != nil && r.State.Active() {
		f.add("supervisor", fmt.Sprintf("pid %d on %s", r.Supervisor.PID, r.Supervisor.Host))
	}
	if r.CancelRequested && r.State.Active() {
		f.add("cancel", "requested")
	}
	if c := resultCommit(r); c != "" {
		f.add("branch", r.Branch)
		f.add("commit", shortCommit(c))
	}
	if r.Result != nil && r.Result.FilesChanged > 0 {
		f.add("changes", changesLine(r.Result.FilesChanged, r.Result.Insertions, r.Result.Deletions))
	}
	if r.Result != nil && len(r.Result.Refused) > 0 {
		f.add("refused", fmt.Sprintf("%d entries (see 'agentrun result %s')", len(r.Result.Refused), r.ID))
	}
	if r.Usage != nil {
		f.add("tokens", usageLine(r.Usage))
	}
	if phases != "" {
		f.add("phases", oneLine(phases, 200))
	}
	if hint.network != nil {
		f.add("network", oneLine(hint.network.Hint, 0))
	}
	if hint.model != nil {
		f.add("model", oneLine(hint.model.Hint, 0))
	}
	if r.Verdict != nil {
		f.add("verdict", verdictLine(r.Verdict))
	}
	for _, w := range r.Warnings {
		f.add("warning", oneLine(w, 0))
	}
	f.add("attempts", fmt.Sprintf("%d of %d", len(r.Attempts), r.MaxAttempts))
	if err := f.write(app.Stdout); err != nil {
		return err
	}
	if err := writeAttempts(app.Stdout, col, now, r.Attempts); err != nil {
		return err
	}
	if len(r.Attempts) == 0 && len(r.Checks) > 0 {
		names := make([]string, len(r.Checks))
		for i, c := range r.Checks {
			names[i] = oneLine(c.Name, 40)
		}
		fmt.Fprintln(app.Stdout, "checks    "+strings.Join(names, ", "))
	}
	if err := writeProvenance(app.Stdout, r.Provenance); err != nil {
		return err
	}
	if next := nextStep(r); next != "" {
		fmt.Fprintf(app.Stdout, "\nnext: %s\n", next)
	}
	return nil
}

// writeAttempts prints each attempt with its checks.
func writeAttempts(w io.Writer, col bool, now time.Time, attempts []run.Attempt) error {
	for _, a := range attempts {
		fmt.Fprintln(w, "  "+attemptLine(now, &a))
		if len(a.Checks) == 0 {
			continue
		}
		var t table
		for _, c := range a.Checks {
			t.add("    "+checkMark(col, c), oneLine(c.Name, 40), checkDetail(c))
		}
		if err := t.write(w); err != nil {
			return err
		}
	}
	return nil
}

// addTimes adds when the run was created, started and finished (or how
// long it has run), counting only the work when it was resumed.
func addTimes(f *fields, r *run.Run, now time.Time, active time.Duration, resumes int) {
	f.add("created", r.CreatedAt.Local().Format(localTime)+" ("+ago(now, r.CreatedAt)+")")
	if r.StartedAt != nil {
		f.add("started", r.StartedAt.Local().Format(localTime))
	}
	if d, ok := runDuration(now, r); ok {
		took := humanDuration(d)
		if resumes > 0 && active > 0 && active < d {
			// The gaps while it waited for a resume are not work.
			took = fmt.Sprintf("%s of work, %s since it first started, resumed %s", humanDuration(active), humanDuration(d), plural(resumes, "time"))
		}
		if r.FinishedAt != nil {
			f.add("finished", r.FinishedAt.Local().Format(localTime)+" (took "+took+")")
		} else {
			f.add("running", took)
		}
	}
}

// writeProvenance prints the provenance record.
func writeProvenance(w io.Writer, p run.Provenance) error {
	fmt.Fprintln(w, "provenance")
	var pf fields
	pf.add("  version", p.Version)
	pf.add("  host", p.Host)
	pf.add("  mode", p.Mode)
	pf.add("  sandbox", p.Sandbox)
	pf.add("  agent", oneLine(p.AgentCommand, 72))
	pf.add("  policy", p.PolicyDigest)
	if p.OrgPolicyDigest != "" {
		pf.add("  org policy", p.OrgPolicyDigest)
	}
	for _, g := range groupEnforced(p.Enforced) {
		pf.add("  "+g.label, oneLine(g.what, 0))
	}
	return pf.write(w)
}

// enforcedGroup is the isolation and limits that share one status.
type enforcedGroup struct{ label, what string }

// groupEnforced folds provenance.enforced for people: what is enforced on
// one line, then what is unavailable, one line per reason.
func groupEnforced(m map[string]string) []enforcedGroup {
	byStatus := map[string][]string{}
	for k, v := range m {
		if k == "workspace" {
			continue // not isolation: status's disk line says it
		}
		byStatus[v] = append(byStatus[v], oneLine(k, 30))
	}
	statuses := make([]string, 0, len(byStatus))
	for v, keys := range byStatus {
		sort.Strings(keys)
		statuses = append(statuses, v)
	}
	sort.Slice(statuses, func(i, j int) bool {
		ei, ej := statuses[i] == "enforced", statuses[j] == "enforced"
		if ei != ej {
			return ei
		}
		return statuses[i] < statuses[j]
	})
	var out []enforcedGroup
	for _, v := range statuses {
		keys := strings.Join(byStatus[v], ", ")
		label, why, _ := strings.Cut(v, ": ")
		g := enforcedGroup{label: oneLine(label, 20), what: keys}
		if why != "" {
			g.what += " (" + why + ")"
		}
		out = append(out, g)
	}
	return out
}

func agentLine(a run.AgentSpec) string {
	s := a.Name
	switch {
	case a.Command != "":
		s += ": " + oneLine(a.Command, 60)
	case a.Model != "":
		s += ": " + a.Model
		if a.Provider != "" {
			s += " via " + a.Provider
		}
	}
	return s
}

func sandboxLine(d Deps, s run.SandboxConfig) string {
	out := s.Backend
	if !d.isolates(s.Backend) {
		out += " (no isolation)"
	}
	if s.Network != "" {
		out += ", network " + s.Network
	}
	if len(s.Allow) > 0 {
		out += " (" + oneLine(strings.Join(s.Allow, ", "), 60) + ")"
	}
	return out
}

func attemptLine(now time.Time, a *run.Attempt) string {
	s := fmt.Sprintf("#%d", a.N)
	if a.Resumed {
		s += " (resumed)"
	}
	switch {
	case a.FinishedAt != nil:
		s += " " + humanDuration(a.FinishedAt.Sub(a.StartedAt))
	case !a.StartedAt.IsZero():
		s += " running for " + humanDuration(now.Sub(a.StartedAt))
	}
	if a.Outcome != "" {
		s += " " + string(a.Outcome)
	}
	if a.ExitCode != nil {
		s += fmt.Sprintf(" (agent exit %d)", *a.ExitCode)
	}
	if a.Message != "" {
		s += ": " + oneLine(a.Message, 60)
	}
	return s
}

func checkMark(col bool, c run.CheckResult) string {
	if c.Passed {
		return paint(col, sgrGreen, "pass")
	}
	return paint(col, sgrRed, "FAIL")
}

func checkDetail(c run.CheckResult) string {
	s := fmt.Sprintf("exit %d, %s", c.ExitCode, humanDuration(c.Duration.D()))
	if c.TimedOut {
		s += ", timed out"
	}
	return s
}

func usageLine(u *run.Usage) string {
	s := fmt.Sprintf("%d prompt, %d completion", u.PromptTokens, u.CompletionTokens)
	if u.CachedTokens > 0 {
		s += fmt.Sprintf(", %d cached", u.CachedTokens)
	}
	if u.Requests > 0 {
		s += fmt.Sprintf(", %d requests", u.Requests)
	}
	if u.Turns > 0 {
		s += fmt.Sprintf(", %d turns", u.Turns)
	}
	unpriced := false
	for _, m := range u.Models {
		unpriced = unpriced || m.Unpriced
	}
	switch {
	case u.CostUSD > 0 && unpriced:
		s += fmt.Sprintf(", ~$%.4f (some models unpriced)", u.CostUSD)
	case u.CostUSD > 0:
		s += fmt.Sprintf(", ~$%.4f", u.CostUSD)
	}
	if len(u.Models) > 1 {
		var names []string
		for n := range u.Models {
			names = append(names, n)
		}
		slices.Sort(names)
		s += " (" + oneLine(strings.Join(names, ", "), 80) + ")"
	}
	return s
}

func verdictLine(v *run.Verdict) string {
	s := v.Value
	if v.By != "" {
		s += " by " + oneLine(v.By, 40)
	}
	if !v.At.IsZero() {
		s += " at " + v.At.Local().Format(localTime)
	}
	if v.Note != "" {
		s += ": " + oneLine(v.Note, 60)
	}
	return s
}

// nextStep suggests the command a person most likely wants now.
func nextStep(r *run.Run) string {
	switch {
	case r.State.Active():
		return "agentrun logs -f " + r.ID
	case r.State.Resumable():
		return "agentrun resume " + r.ID + "   (see why first: agentrun result " + r.ID + ")"
	case resultCommit(r) != "" && r.Verdict == nil:
		return "agentrun result " + r.ID + " --patch, then agentrun verdict " + r.ID + " accept|reject"
	}
	return ""
}

// resultCommit is the run's exported commit, if any.
func resultCommit(r *run.Run) string {
	if r.Result != nil && r.Result.Commit != "" {
		return r.Result.Commit
	}
	return r.Commit
}

// gatewayLine says where the run's model traffic goes and its budget.
func gatewayLine(r *run.Run) string {
	var parts []string
	for _, rs := range r.Gateway.Routes {
		to := rs.URL
		if rs.Server != "" && rs.Server != rs.URL {
			to += " (" + rs.Server + ")"
		}
		if rs.MaxConcurrent > 0 {
			to += fmt.Sprintf(", %d at once", rs.MaxConcurrent)
		}
		parts = append(parts, rs.Name+" → "+oneLine(to, 80))
	}
	s := strings.Join(parts, "; ")
	if r.Agent.Model != "" {
		s = oneLine(r.Agent.Model, 40) + " via the gateway: " + s
	}
	var budget []string
	if r.Gateway.MaxTokens > 0 {
		budget = append(budget, fmt.Sprintf("%d tokens", r.Gateway.MaxTokens))
	}
	if r.Gateway.MaxCost > 0 {
		budget = append(budget, fmt.Sprintf("$%.2f", r.Gateway.MaxCost))
	}
	if len(budget) > 0 {
		s += "; budget " + strings.Join(budget, ", ")
	}
	return s
}

// localTime is how status shows a time: local, with its zone.
const localTime = "2006-01-02 15:04:05 MST"

// activeTime is the time a run was being worked on, from its journal: from
// each move to preparing to the next end state (or now), so the gaps
// before a resume do not count; and how many times it was resumed.
func activeTime(evs []run.Event, now time.Time) (time.Duration, int) {
	var total time.Duration
	var since time.Time
	starts := 0
	for _, e := range evs {
		if e.Type != run.EventState {
			continue
		}
		switch {
		case e.State == run.StatePreparing && since.IsZero():
			since = e.Time
			starts++
		case e.State.Terminal() && !since.IsZero():
			total += e.Time.Sub(since)
			since = time.Time{}
		}
	}
	if !since.IsZero() {
		total += now.Sub(since)
	}
	return total, max(starts-1, 0)
}

// setupLine is the run's setup command and the layer it is on.
func setupLine(s *run.SetupSpec) string {
	line := oneLine(s.Command, 60) + " (" + s.Source + ")"
	switch {
	case s.Layer != "" && s.Cached:
		line += "; layer " + strings.TrimPrefix(s.Layer, "v1-setup-")[:12] + " cached"
	case s.Layer != "":
		line += fmt.Sprintf("; layer %s made in %s", strings.TrimPrefix(s.Layer, "v1-setup-")[:12], s.Duration.D().Round(time.Millisecond))
	}
	if len(s.Allow) > 0 {
		line += "; network " + strings.Join(s.Allow, ", ")
	}
	return line
}

// labelsLine is labels as KEY=VALUE, sorted.
func labelsLine(labels map[string]string) string {
	ls := make([]string, 0, len(labels))
	for k, v := range labels {
		ls = append(ls, k+"="+v)
	}
	slices.Sort(ls)
	return strings.Join(ls, ", ")
}

// repoLine is the repository as status shows it, with the directory in it
// where the agent and the checks start (run.Run.Subdir), if not its top.
func repoLine(repo, subdir string) string {
	if subdir == "" {
		return repo
	}
	return repo + " (the agent and the checks start in " + subdir + ")"
}
