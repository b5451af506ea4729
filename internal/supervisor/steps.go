package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// runState is what the steps share for one supervisor's life.
type runState struct {
	r         *run.Run
	ws        workspace.Workspace
	sb        sandbox.Sandbox
	stopProxy func(context.Context) error
	cleanSock func()
	gw        *gatewayState
	resumed   bool
	// enforced is what the sandbox enforces, recorded with the first
	// attempt (one write of run.json less on the way to the agent).
	enforced map[string]string
	// ident is the author for the export, read from the repository's
	// configuration while the agent works (nil: the run names one).
	ident <-chan [2]string
}

// prepare: workspace, egress proxy, sandbox. A new workspace is filled
// while the sandbox starts on its (empty) directory: nothing runs in the
// sandbox before prepare returns, so the agent still has the workspace only
// once it is complete.
func (s *Supervisor) prepare(ctx context.Context, rc *runState) error {
	r, l := rc.r, s.Layout
	t0 := time.Now()
	fill, err := s.startWorkspace(ctx, rc)
	if err != nil {
		return err
	}
	var wsTime time.Duration
	var wsErr error
	var wg sync.WaitGroup
	if fill != nil {
		wg.Go(func() { wsErr = fill(); wsTime = time.Since(t0) })
	} else {
		wsTime = time.Since(t0)
	}
	defer wg.Wait() // whatever happens below, the filling has ended
	wsDir, err := filepath.Abs(l.Workspace(r.ID))
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	home := l.SandboxHome(r.ID)
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		return fmt.Errorf("sandbox home: %w", err)
	}
	spec := sandbox.Spec{
		RunID:         r.ID,
		Workspace:     wsDir,
		Home:          home,
		StateDir:      l.SandboxState(r.ID),
		Env:           baseEnv(home),
		Network:       sandbox.NetworkNone,
		LoopbackTCP:   r.Sandbox.LoopbackTCP,
		ReadOnlyPaths: r.Sandbox.ReadOnlyPaths,
		Limits:        sandbox.Limits(r.Sandbox.Limits),
		Image:         r.Sandbox.Image,
		Repo:          r.Repo,
	}
	if r.Sandbox.Network == string(sandbox.NetworkAllowlist) {
		if s.StartEgress == nil {
			return errMissing("the egress proxy")
		}
		sock, clean, err := socketPath(l, r.ID, "egress.sock")
		if err != nil {
			return fmt.Errorf("egress socket: %w", err)
		}
		rc.cleanSock = clean
		stop, err := s.StartEgress(ctx, r, sock, func(rec egress.Record) {
			s.event(run.NewEvent(run.EventEgress, "", rec))
		})
		if err != nil {
			return fmt.Errorf("start egress proxy: %w", err)
		}
		rc.stopProxy = stop
		spec.Network, spec.ProxySocket = sandbox.NetworkAllowlist, sock
	}
	if err := s.startGateway(ctx, rc); err != nil {
		return err
	}
	if rc.gw != nil {
		spec.GatewaySocket = rc.gw.socket
	}
	b, ok := s.Backends[r.Sandbox.Backend]
	if !ok {
		return fmt.Errorf("sandbox backend %q is not available in this build", r.Sandbox.Backend)
	}
	// No Preflight here: submit ran it, and Start fails with the same
	// catalog error if the machine changed since.
	t1 := time.Now()
	sb, err := b.Start(ctx, spec)
	if err != nil {
		return err
	}
	rc.sb = sb
	startTime := time.Since(t1)
	wg.Wait()
	if wsErr != nil {
		return wsErr
	}
	rc.enforced = sb.Enforced()
	s.event(run.NewEvent(run.EventSandbox, "sandbox started ("+b.Name()+")", map[string]any{"backend": b.Name(),
		"enforced": rc.enforced, "network": spec.Network, "workspace_time": wsTime.String(), "start_time": startTime.String()}))
	if rc.gw != nil {
		if sb.GatewayAddr() == "" {
			return fmt.Errorf("the %s sandbox did not bridge the model gateway", b.Name())
		}
		s.event(run.NewEvent(run.EventGateway, "model gateway started at http://"+sb.GatewayAddr()+" ("+strings.Join(rc.gw.routes, ", ")+")",
			map[string]any{"kind": "started", "routes": r.Gateway.Routes, "max_tokens": r.Gateway.MaxTokens, "max_cost": r.Gateway.MaxCost}))
	}
	if r.Export.AuthorName == "" || r.Export.AuthorEmail == "" {
		ch := make(chan [2]string, 1)
		rc.ident = ch
		go func() {
			name, email := configIdentity(context.WithoutCancel(ctx), r.Repo)
			ch <- [2]string{name, email}
		}()
	}
	return nil
}

// startWorkspace opens the workspace a previous supervisor made (resume),
// or creates it. With a provider that can fill an existing directory, it
// only makes the empty directory and returns fill, which completes it.
func (s *Supervisor) startWorkspace(ctx context.Context, rc *runState) (fill func() error, err error) {
	if s.Workspaces == nil {
		return nil, errMissing("the workspace provider")
	}
	r, l := rc.r, s.Layout
	dir, state := l.Workspace(r.ID), l.WorkspaceState(r.ID)
	filler, canFill := s.Workspaces.(workspace.Filler)
	exists := false
	if _, statErr := os.Lstat(dir); statErr == nil {
		exists = true
		// A directory left empty (a supervisor that died right after
		// making it) is filled; anything else was made by Create.
		if !canFill || !isEmptyDir(dir) {
			rc.ws, err = s.Workspaces.Open(ctx, dir, state)
			rc.resumed = len(r.Attempts) > 0
			if err == nil {
				return nil, nil
			}
			if !errors.Is(err, workspace.ErrNoManifest) || len(r.Attempts) > 0 {
				return nil, fmt.Errorf("workspace: %w", err)
			}
			// No manifest and no attempt: the making of the workspace never
			// finished (a supervisor killed while preparing) and no agent
			// has had it. Make it again, from nothing.
			s.event(run.NewEvent(run.EventWarning, "the workspace was left half made; making it again", nil))
			rc.resumed = false
			if err := removeContents(dir); err != nil {
				return nil, fmt.Errorf("workspace: %w", err)
			}
			if !canFill {
				if err := os.Remove(dir); err != nil {
					return nil, fmt.Errorf("workspace: %w", err)
				}
			}
		}
	}
	if canFill && !exists {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
	}
	if !canFill {
		if rc.ws, err = s.Workspaces.Create(ctx, r.Repo, r.Base, dir, state); err != nil {
			return nil, fmt.Errorf("workspace: %w", err)
		}
		return nil, nil
	}
	return func() error {
		ws, err := filler.Fill(ctx, r.Repo, r.Base, dir, state)
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		rc.ws = ws
		return nil
	}, nil
}

// removeContents removes everything inside dir (os.RemoveAll never
// follows a symlink).
func removeContents(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// isEmptyDir reports a directory (not a symlink) with nothing in it.
func isEmptyDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// baseEnv is the complete base environment inside the sandbox: nothing of
// the supervisor's own environment except PATH.
func baseEnv(home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + filepath.Join(home, "tmp")}
}

// stopGrace bounds a sandbox's polite stop before it is killed.
const stopGrace = 50 * time.Millisecond

// cleanup stops the sandbox, then the proxy. It never touches the workspace.
func (s *Supervisor) cleanup(rc *runState) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if rc.sb != nil {
		// The agent's and the checks' process groups are already gone
		// (Exec returns only after killing them): what is left is the
		// backend's own, so the grace for a polite stop is short.
		sctx, scancel := context.WithTimeout(ctx, stopGrace)
		err := rc.sb.Destroy(sctx)
		scancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "supervise %s: destroy sandbox: %v\n", s.ID, err)
		}
		s.event(run.NewEvent(run.EventSandbox, "sandbox stopped", nil))
	}
	if rc.stopProxy != nil {
		_ = rc.stopProxy(ctx)
	}
	rc.gw.stop()
	if rc.cleanSock != nil {
		rc.cleanSock()
	}
}

// attempts runs agent attempts and checks until the checks pass or the
// attempts are used up. ok means: go on to export.
func (s *Supervisor) attempts(ctx context.Context, rc *runState) (ok bool, err error) {
	r := rc.r
	first := len(r.Attempts) + 1
	prev := previousEnding(r, rc.resumed, s.Handoff.Ended, s.Handoff.Note)
	budget := max(r.MaxAttempts, 1)
	ag, err := s.NewAgent(r, s.getenv, func(msg string) { s.event(run.NewEvent(run.EventWarning, msg, nil)) }, rc.gw.host())
	if err != nil {
		s.finish(run.StateFailed, run.ReasonAgentFailed, err.Error())
		return false, err
	}
	for i := range budget {
		n := first + i
		last := i == budget-1
		// The agent starts only from the running state: a cancel that wins
		// this compare-and-set means it never starts.
		resumed := rc.resumed && i == 0
		started := time.Now().UTC()
		if _, err := s.cas(ctx, []run.State{run.StatePreparing, run.StateRunning, run.StateChecking},
			run.StateRunning, run.ReasonNone, fmt.Sprintf("attempt %d", n), func(r *run.Run) {
				r.Attempts = append(r.Attempts, run.Attempt{N: n, StartedAt: started, Resumed: resumed})
				if rc.enforced != nil {
					r.Provenance.Enforced = rc.enforced
				}
			}); err != nil {
			if errors.Is(err, run.ErrConflict) || ctx.Err() != nil {
				s.stopped(ctx, "")
				return false, nil
			}
			return false, err
		}
		prompt := buildPrompt(r.Task, prev)
		actx, stopAttempt := context.WithCancelCause(ctx)
		// Past the budget the gateway answers the agent with an error; an
		// agent that does not end on its own is stopped after a grace.
		rc.gw.setBudgetStop(func() { time.AfterFunc(budgetGrace, func() { stopAttempt(errBudget) }) })
		out, err := s.attempt(actx, rc, ag, n, prompt, resumed)
		rc.gw.setBudgetStop(nil)
		stopAttempt(nil)
		if why := rc.gw.exceeded(); why != "" && ctx.Err() == nil {
			s.finish(run.StateFailed, run.ReasonBudgetExceeded,
				why+"; the workspace is kept: continue with 'agentrun resume "+r.ID+" --max-cost N' (or --max-tokens N)")
			return false, nil
		}
		if s.diskExceeded(ctx, rc) {
			return false, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				s.stopped(ctx, "")
				return false, nil
			}
			s.finish(run.StateFailed, run.ReasonSandboxError, err.Error())
			return false, err
		}
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return false, nil
		}
		if out.Reason != run.ReasonCompleted {
			prev = fmt.Sprintf("The previous attempt (%d) did not finish: %s.", n, describeOutcome(out))
			if last || out.Final {
				// (Final: another attempt would meet the same model error.)
				s.finish(run.StateFailed, out.Reason, describeOutcome(out))
				return false, nil
			}
			continue
		}
		if len(r.Checks) == 0 {
			return true, nil // nothing to check: straight on to export
		}
		if _, err := s.cas(ctx, []run.State{run.StateRunning}, run.StateChecking, run.ReasonNone, "", nil); err != nil {
			if errors.Is(err, run.ErrConflict) || ctx.Err() != nil {
				s.stopped(ctx, "")
				return false, nil
			}
			return false, err
		}
		results, err := s.checks(ctx, rc, n)
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return false, nil
		}
		if s.diskExceeded(ctx, rc) {
			return false, nil
		}
		if err != nil {
			s.finish(run.StateFailed, run.ReasonSandboxError, err.Error())
			return false, err
		}
		failed := failedChecks(s.Layout, r.ID, n, results)
		if failed == "" {
			return true, nil
		}
		prev = failed
		if last {
			s.finish(run.StateFailed, run.ReasonChecksFailed, checksSummary(results))
			return false, nil
		}
	}
	return false, nil
}

func (s *Supervisor) getenv(k string) string { return s.Handoff.Env[k] }

// diskExceeded ends the run disk_exceeded when its sandbox killed itself
// past the disk bound it samples.
func (s *Supervisor) diskExceeded(ctx context.Context, rc *runState) bool {
	err := sandbox.Exceeded(rc.sb)
	if err == nil || ctx.Err() != nil {
		return false
	}
	s.finish(run.StateFailed, run.ReasonDiskExceeded, err.Error()+"; raise the bound of a new run with --disk or --disk-inodes (config keys disk, disk_inodes)")
	return true
}

// attempt runs agent attempt n and records it.
func (s *Supervisor) attempt(ctx context.Context, rc *runState, ag agent.Agent, n int, prompt string, resumed bool) (*agent.Outcome, error) {
	r, l := rc.r, s.Layout
	dir := l.AttemptDir(r.ID, n)
	if err := os.MkdirAll(filepath.Join(dir, "checks"), 0o700); err != nil {
		return nil, fmt.Errorf("attempt dir: %w", err)
	}
	if err := os.WriteFile(l.Prompt(r.ID, n), []byte(prompt), 0o600); err != nil {
		return nil, fmt.Errorf("write prompt: %w", err)
	}
	logf, err := os.OpenFile(l.AgentLog(r.ID, n), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close()
	// The attempt itself was recorded with the move to running.
	ev := run.NewEvent(run.EventAttempt, fmt.Sprintf("attempt %d started", n), nil)
	ev.Attempt = n
	s.event(ev)

	before := rc.gw.usage()
	out, err := ag.Attempt(ctx, agent.AttemptInput{
		Run: r, N: n, Prompt: prompt, Resumed: resumed,
		Runner: rc.sb.Runner(), WorkDir: rc.sb.WorkDir(), Env: s.agentEnv(r),
		Dir: dir, RunDir: l.RunDir(r.ID), Output: logf,
		Gateway: rc.gw.access(rc.sb.GatewayAddr()), Home: rc.sb.HomeDir(), HostHome: l.SandboxHome(r.ID),
		ContinueSession: continueSession(r, len(r.Attempts)+1, n),
		Event: func(e run.Event) {
			if e.Attempt == 0 {
				e.Attempt = n
			}
			s.event(e)
		},
	})
	if err == nil && out == nil {
		err = errors.New("agent returned no outcome")
	}
	if err != nil {
		out = &agent.Outcome{Reason: run.ReasonSandboxError, Message: err.Error()}
		if ctx.Err() != nil {
			out.Reason = run.ReasonCancelled
		}
	}
	finished := time.Now().UTC()
	if rc.gw != nil {
		// Every model request went through the gateway: its count is the
		// attempt's usage (an agent's own count would be a second one).
		after := rc.gw.usage()
		turns := 0
		if out.Usage != nil {
			turns = out.Usage.Turns
		}
		out.Usage = after.Minus(before)
		if out.Usage == nil && turns > 0 {
			out.Usage = &run.Usage{}
		}
		if out.Usage != nil {
			out.Usage.Turns = turns
		}
	}
	s.recordAttempt(n, out, finished)
	ev = run.NewEvent(run.EventAgentExit, fmt.Sprintf("attempt %d: %s", n, describeOutcome(out)), map[string]any{"exit_code": out.ExitCode, "outcome": out.Reason})
	ev.Attempt = n
	s.event(ev)
	return out, err
}

// recordAttempt records how attempt n ended, with the next state change.
func (s *Supervisor) recordAttempt(n int, out *agent.Outcome, finished time.Time) {
	s.later(func(r *run.Run) {
		for i := range r.Attempts {
			if r.Attempts[i].N == n {
				a := &r.Attempts[i]
				a.FinishedAt, a.ExitCode, a.Outcome, a.Message = &finished, out.ExitCode, out.Reason, out.Message
				a.Session, a.SessionContinued = out.Session, out.SessionContinued
				a.Usage = out.Usage.Clone()
			}
		}
		if out.Usage != nil {
			if r.Usage == nil {
				r.Usage = &run.Usage{}
			}
			r.Usage.Add(*out.Usage)
		}
	})
}

// agentEnv is KEY=VALUE for the variables the run names that are set in
// the handed-off environment.
func (s *Supervisor) agentEnv(r *run.Run) []string {
	var env []string
	for _, k := range r.Agent.Env {
		if v, ok := s.Handoff.Env[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// checks runs every check in the sandbox after attempt n.
func (s *Supervisor) checks(ctx context.Context, rc *runState, n int) ([]run.CheckResult, error) {
	r := rc.r
	var results []run.CheckResult
	for _, c := range r.Checks {
		res, err := s.check(ctx, rc, n, c)
		if err != nil {
			return results, err
		}
		results = append(results, res)
		ev := run.NewEvent(run.EventCheck, fmt.Sprintf("check %s: %s", c.Name, passFail(res.Passed)),
			map[string]any{"name": c.Name, "exit_code": res.ExitCode, "passed": res.Passed, "duration": res.Duration, "log": res.Log})
		ev.Attempt = n
		s.event(ev)
	}
	if len(results) == 0 {
		return nil, nil // nothing to record
	}
	s.later(func(r *run.Run) {
		for i := range r.Attempts {
			if r.Attempts[i].N == n {
				r.Attempts[i].Checks = results
			}
		}
	})
	return results, nil
}

func (s *Supervisor) check(ctx context.Context, rc *runState, n int, c run.CheckSpec) (run.CheckResult, error) {
	r, l := rc.r, s.Layout
	res := run.CheckResult{Name: c.Name, Log: layout.CheckLogRel(n, c.Name)}
	logf, err := os.OpenFile(l.CheckLog(r.ID, n, c.Name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return res, fmt.Errorf("check log: %w", err)
	}
	defer logf.Close()
	start := time.Now()
	er, err := rc.sb.Runner().Exec(ctx, runner.ExecRequest{Shell: c.Command, Cwd: rc.sb.WorkDir()}, logf, logf)
	res.Duration = run.Duration(time.Since(start))
	switch {
	case ctx.Err() != nil:
		// Killed: by the run's time limit (a timeout, as the check's own
		// would be) or by a cancel.
		res.ExitCode = -1
		res.TimedOut = errors.Is(context.Cause(ctx), errRunTimeout)
		if res.TimedOut {
			fmt.Fprintf(logf, "agentrun: the check was stopped: %v\n", errRunTimeout)
		}
		return res, nil
	case runner.IsCode(err, runner.CodeExec):
		res.ExitCode = 127
		fmt.Fprintf(logf, "agentrun: the check could not be started: %v\n", err)
		return res, nil
	case err != nil:
		return res, fmt.Errorf("check %s: %w", c.Name, err)
	}
	res.ExitCode, res.TimedOut = er.ExitCode, er.TimedOut
	res.Passed = er.ExitCode == 0 && !er.TimedOut
	return res, nil
}

// export: scan the workspace, write the commit and the patch.
func (s *Supervisor) export(ctx context.Context, rc *runState) error {
	r, l := rc.r, s.Layout
	if _, err := s.cas(ctx, []run.State{run.StateChecking, run.StateRunning}, run.StateExporting, run.ReasonNone, "", nil); err != nil {
		if errors.Is(err, run.ErrConflict) || ctx.Err() != nil {
			s.stopped(ctx, "")
			return nil
		}
		return err
	}
	fail := func(err error) error {
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return nil
		}
		s.finish(run.StateFailed, run.ReasonExportFailed, err.Error())
		return err
	}
	if s.Export == nil {
		return fail(errMissing("export"))
	}
	t0 := time.Now()
	cs, err := rc.ws.Scan(ctx, workspace.Limits{MaxFiles: r.Export.MaxFiles, MaxBytes: r.Export.MaxBytes})
	scanTime := time.Since(t0)
	if err != nil {
		return fail(fmt.Errorf("scan workspace: %w", err))
	}
	for _, ref := range cs.Refused {
		s.event(run.NewEvent(run.EventRefused, ref.Path+": "+ref.Reason, ref))
	}
	if len(cs.Changes) == 0 {
		s.finishNoChanges(cs.Refused)
		return nil
	}
	opts := workspace.ExportOptions{
		Repo: r.Repo, Base: r.Base, Branch: r.Branch,
		Message:    CommitMessage(r.Task, r.ID),
		AuthorName: r.Export.AuthorName, AuthorEmail: r.Export.AuthorEmail,
		PatchPath: l.Patch(r.ID),
		Force:     len(r.Attempts) > 0 && rc.resumed,
	}
	if rc.ident != nil {
		ident := <-rc.ident
		if opts.AuthorName == "" {
			opts.AuthorName = ident[0]
		}
		if opts.AuthorEmail == "" {
			opts.AuthorEmail = ident[1]
		}
	}
	// The result is recorded with the end state, in the export's last,
	// uncancelled step: the branch moves only if this transition holds,
	// and is moved back if it does not (a cancel that came first, a full
	// disk), so it never points at a commit the run did not record.
	t1 := time.Now()
	var exportTime time.Duration
	opts.Record = func(res *run.ExportResult) error {
		exportTime = time.Since(t1)
		if len(res.Refused) == 0 {
			res.Refused = cs.Refused // (an Export may already carry them)
		}
		if err := context.Cause(ctx); err != nil {
			return err // the cancel won: the branch goes back
		}
		s.event(run.NewEvent(run.EventExport, fmt.Sprintf("exported %d file%s to %s", res.FilesChanged, map[bool]string{true: "", false: "s"}[res.FilesChanged == 1], r.Branch),
			map[string]any{"commit": res.Commit, "files": res.FilesChanged, "refused": len(res.Refused),
				"scan_time": scanTime.String(), "export_time": exportTime.String()}))
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := s.cas(rctx, []run.State{run.StateExporting}, run.StateSucceeded, run.ReasonCompleted, "", func(r *run.Run) {
			r.Commit, r.Patch, r.Result = res.Commit, res.Patch, res
		})
		if err != nil {
			s.event(run.NewEvent(run.EventWarning, "the export could not be recorded; branch "+r.Branch+" is left as it was: "+err.Error(), nil))
		}
		return err
	}
	_, err = s.Export(ctx, cs, opts)
	if isNoChanges(err) {
		s.finishNoChanges(cs.Refused)
		return nil
	}
	if err != nil {
		return fail(fmt.Errorf("export: %w", err))
	}
	return nil
}

func (s *Supervisor) finishNoChanges(refused []run.Refusal) {
	msg := "the agent finished and the checks passed, but nothing changed"
	if len(refused) > 0 {
		msg = fmt.Sprintf("no exportable changes (%d refused)", len(refused))
		s.later(func(r *run.Run) { r.Result = &run.ExportResult{Branch: r.Branch, Refused: refused} })
	}
	s.transition([]run.State{run.StateExporting}, run.StateFailed, run.ReasonNoChanges, msg)
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

func passFail(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}
