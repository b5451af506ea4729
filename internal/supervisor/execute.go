package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Causes of the run context ending.
var (
	errRunTimeout      = errors.New("the run's time limit was reached")
	errCancelRequested = errors.New("the run was cancelled")
)

var activeStates = []run.State{run.StateQueued, run.StatePreparing, run.StateRunning, run.StateChecking, run.StateExporting}

// cancelPoll is how often the supervisor rereads the run for a cancel
// request (the CLI also signals it; this catches a missed signal).
// cancelBackupPoll is how often it rereads where Cancelled tells it of a
// cancel at once (an agent host: its heartbeat brings the server's
// cancel, and each reread is a request to the server).
const (
	cancelPoll       = 200 * time.Millisecond
	cancelBackupPoll = 2 * time.Second
)

// execute is the run's life: queue, prepare, attempts, export.
func (s *Supervisor) execute(parent context.Context) error {
	r, err := s.Store.Get(parent, s.ID)
	if err != nil {
		return err
	}
	if r.State != run.StateQueued {
		return fmt.Errorf("run is %s, not queued", r.State)
	}
	host, _ := os.Hostname()
	info := &run.SupervisorInfo{PID: os.Getpid(), Host: host, StartedAt: time.Now().UTC()}
	if !s.InProcess {
		info.ProcStart, _ = procStart(info.PID) // 0 where unknown: cancel then never signals, it polls
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	go s.watchCancel(ctx, cancel)
	s.prewarm(ctx, r.Sandbox.Backend)

	// queued: a free slot at once (the usual case) records this process
	// with the move to preparing; a run that waits records it first, so
	// that cancel can signal it while it waits.
	defer s.dequeue(r.Seq)
	recorded := false
	slot, err := s.trySlot(ctx, r.Seq)
	if err == nil && slot == nil {
		if _, err := s.Store.Update(ctx, s.ID, func(r *run.Run) error { r.Supervisor = info; return nil }); err != nil {
			s.stopped(ctx, run.StateQueued)
			return fmt.Errorf("record supervisor: %w", err)
		}
		recorded = true
		slot, err = s.waitSlot(ctx, r.Seq)
	}
	if err != nil {
		if errors.Is(err, coord.ErrReleased) && ctx.Err() == nil {
			// The lease expired while the run waited (its renewals
			// stalled past the lease's TTL): another process may hold it
			// now. The run stays queued, unclaimed again, for whoever
			// takes it next; nothing of it has started.
			if recorded {
				s.unclaim(info)
			}
			return fmt.Errorf("wait for a slot: %w", err)
		}
		s.stopped(ctx, run.StateQueued)
		return nil
	}
	defer slot.Release()

	// queued -> preparing: loses to a cancel that came first. The run
	// leaves the queue after it, so that a younger run's slot waits for
	// this move and the journal shows the runs starting in queue order.
	seq := r.Seq
	r, err = s.cas(ctx, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, "", func(r *run.Run) {
		if !recorded {
			r.Supervisor = info
		}
	})
	s.dequeue(seq)
	if errors.Is(err, run.ErrConflict) {
		return nil
	}
	if err != nil {
		s.stopped(ctx, run.StateQueued)
		return fmt.Errorf("start preparing: %w", err)
	}
	if r.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, r.Timeout.D(), errRunTimeout)
		defer stop()
	}

	var rs resources
	s.release, s.settle = rs.stop, rs.settle
	defer s.releaseResources()
	p, err := s.prepare(ctx, r, &rs)
	if err != nil {
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return nil
		}
		reason := run.ReasonSandboxError
		if isSetupFailure(err) {
			reason = run.ReasonSetupFailed
		}
		s.event(run.NewEvent(run.EventWarning, "prepare failed: "+err.Error(), nil))
		s.finish(run.StateFailed, reason, err.Error())
		return err
	}
	from, ok, err := s.work(ctx, p)
	if err != nil || !ok {
		return err
	}
	// Nothing runs in the sandbox any more: stop it before the workspace
	// is read, so no process left behind can change it during the scan.
	s.releaseResources()
	return s.export(ctx, p, from)
}

// work runs the agent's attempts and their checks (attempts); ok means: go
// on to export, from one of the states from. A run resumed where it
// stopped, at its export (Handoff.ExportOnly), has its last attempt's work
// exported as it is, straight from preparing.
func (s *Supervisor) work(ctx context.Context, p *prepared) (from []run.State, ok bool, err error) {
	if s.Handoff.ExportOnly && p.resumed {
		a := p.run.LastAttempt()
		s.event(run.NewEvent(run.EventResume, fmt.Sprintf("the run stopped at its export, and attempt %d's work passed its checks: exporting it again, without another attempt", a.N), map[string]any{"export_only": true, "attempt": a.N}))
		return []run.State{run.StatePreparing}, true, nil
	}
	ok, err = s.attempts(ctx, p)
	return []run.State{run.StateChecking, run.StateRunning}, ok, err
}

// resource is a step that holds something for the run while it lives:
// the workspace, the egress proxy, the model gateway, the sandbox
// (step_*.go). Start makes it available. Stop lets it go: it is
// idempotent, safe on a step that never started (or whose Start failed
// half way), and never touches what the workspace holds.
type resource interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context)
}

// settler is a resource whose Stop leaves part of its letting go for
// later (a sandbox's teardown, once nothing runs in it): settle does that
// part.
type settler interface{ settle(ctx context.Context) }

// resources are the resource steps the run started, in order.
type resources struct{ started []resource }

// start starts step; whether it fails or not, stop stops it.
func (rs *resources) start(ctx context.Context, step resource) error {
	rs.started = append(rs.started, step)
	return step.Start(ctx)
}

// letGoWithin bounds the stop of the run's resource steps, and again
// what their Stop left for later (settle).
const letGoWithin = 30 * time.Second

// stop stops the started steps in reverse order: the sandbox first (so
// nothing runs any more), the servers it reached next, the workspace
// last. It is Supervisor.release: it runs once, before the run's end
// state is stored and before the export scans the workspace.
func (rs *resources) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), letGoWithin)
	defer cancel()
	for i := len(rs.started) - 1; i >= 0; i-- {
		rs.started[i].Stop(ctx)
	}
}

// settle finishes what the steps' Stop left for later, in the order
// stop went. It is Supervisor.settle: it runs after stop, once the run
// has ended (or cannot go on), before the supervisor lets the run go.
func (rs *resources) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), letGoWithin)
	defer cancel()
	for i := len(rs.started) - 1; i >= 0; i-- {
		if st, ok := rs.started[i].(settler); ok {
			st.settle(ctx)
		}
	}
}

// prepared is what the attempts and the export are given of the started
// resource steps.
type prepared struct {
	run      *run.Run
	ws       workspace.Workspace
	resumed  bool // an earlier attempt's agent had the workspace
	sb       sandbox.Sandbox
	enforced map[string]string // what sb enforces, recorded with the first attempt
	gw       *gatewayStep      // meters the attempts, stops them at the budget
	// ident is the author for the export, read from the repository's
	// configuration while the agent works (nil: the run names one).
	ident <-chan [2]string
	// home says how HOME was filled while the sandbox started (nil: it
	// was not, or that was said already).
	home <-chan *run.Event
}

// prepare starts the resource steps (preparing): the workspace, the
// egress proxy, the model gateway, then the sandbox with their sockets.
// A new workspace is filled while the sandbox starts on its (empty)
// directory: the sandbox step returns only once it is complete, and
// nothing runs in the sandbox before, so the agent has the workspace only
// once it is complete. Whatever happens, rs stops what was started.
func (s *Supervisor) prepare(ctx context.Context, r *run.Run, rs *resources) (*prepared, error) {
	l := s.Layout
	home := s.prepareHome(r)
	backend := s.Backends[r.Sandbox.Backend]
	ws := &workspaceStep{Provider: s.Workspaces, Cached: s.CachedCopy, Overlay: s.Overlay, Record: r, Dir: l.Workspace(r.ID), StateDir: l.WorkspaceState(r.ID),
		Removed: l.WorkspaceRemoved(r.ID), ProbeDir: l.Cache(), Event: s.event}
	if lm, ok := backend.(sandbox.LayerMounter); ok {
		ws.Probe = lm.ProbeLayers
	}
	eg := &egressStep{Record: r, Layout: l, StartProxy: s.StartEgress, Getenv: s.getenv, Event: s.event}
	gw := &gatewayStep{Record: r, Layout: l, Getenv: s.getenv, Capacity: s.Capacity, Event: s.event}
	for _, step := range []resource{ws, eg, gw} {
		if err := rs.start(ctx, step); err != nil {
			return nil, err
		}
	}
	sb := &sandboxStep{Record: r, Layout: l, Backend: backend, Layers: ws.Layers(), WorkspaceMode: ws.Mode(),
		ProxySocket: eg.Socket(), GatewaySocket: gw.Socket(), Ready: ws.Wait, Event: s.event,
		Env: toolchainEnv(r.Sandbox.Toolchains), ReadOnly: toolchainPaths(r.Sandbox.Toolchains)}
	if r.Setup != nil {
		if err := s.setup(ctx, r, ws, sb); err != nil {
			return nil, err
		}
	}
	if err := rs.start(ctx, sb); err != nil {
		return nil, err
	}
	gw.announce(sb.Sandbox().GatewayAddr())
	return &prepared{run: r, ws: ws.Workspace(), resumed: ws.Resumed(), sb: sb.Sandbox(), enforced: sb.Enforced(),
		gw: gw, ident: authorIdentity(ctx, r), home: home}, nil
}

// prepareHome fills a new run's HOME (Deps.PrepareHome) while the
// resources start; the first attempt waits for it (homeReady).
func (s *Supervisor) prepareHome(r *run.Run) <-chan *run.Event {
	if s.PrepareHome == nil || len(r.Attempts) > 0 {
		return nil
	}
	ch := make(chan *run.Event, 1)
	go func() { ch <- s.PrepareHome(r, s.Layout.SandboxHome(r.ID), s.Layout.AgentHomes()) }()
	return ch
}

// homeReady waits for prepareHome and journals what it did.
func (s *Supervisor) homeReady(p *prepared) {
	if p.home == nil {
		return
	}
	if ev := <-p.home; ev != nil {
		s.event(*ev)
	}
	p.home = nil
}

// errBudget ends an attempt whose model budget is spent.
var errBudget = errors.New("the run's model budget is spent")

// errModelFailing ends an attempt whose model server the gateway gave up
// on (gateway.Gateway.Failing).
var errModelFailing = errors.New("the model gateway gave up on the model server")

// budgetGrace is how long an agent told that the budget is spent (or
// answered by a model server the gateway gave up on) may take to end on
// its own before it is stopped.
const budgetGrace = 2 * time.Second

// next is what comes after an attempt and its checks.
type next int

const (
	nextAttempt next = iota // another attempt, told how this one ended
	nextExport              // the checks passed: export
	nextNothing             // the run has ended (or cannot go on)
)

// attempts runs agent attempts and checks until the checks pass or the
// attempts are used up (running, checking). ok means: go on to export.
func (s *Supervisor) attempts(ctx context.Context, p *prepared) (ok bool, err error) {
	r := p.run
	first := len(r.Attempts) + 1
	prev := previousEnding(r, p.resumed, s.Handoff.Ended, s.Handoff.Note)
	budget := max(r.MaxAttempts, 1)
	ag, err := s.NewAgent(r, s.getenv, func(msg string) { s.event(run.NewEvent(run.EventWarning, msg, nil)) }, p.gw.host())
	if err != nil {
		s.finish(run.StateFailed, run.ReasonAgentFailed, err.Error())
		return false, err
	}
	for i := range budget {
		then, note, err := s.attempt(ctx, p, ag, first+i, buildPrompt(r.Task, prev), p.resumed && i == 0, i == budget-1)
		if then != nextAttempt {
			return then == nextExport, err
		}
		prev = note
	}
	return false, nil
}

// attempt moves the run to running with attempt n recorded, runs the
// attempt step, then the checks. For another attempt it returns what the
// agent is told of this one.
func (s *Supervisor) attempt(ctx context.Context, p *prepared, ag agent.Agent, n int, prompt string, resumed, last bool) (next, string, error) {
	// The agent starts only from the running state: a cancel that wins
	// this compare-and-set means it never starts.
	r := p.run
	step := &attemptStep{Record: r, Layout: s.Layout, Agent: ag, Sandbox: p.sb, Gateway: p.gw,
		N: n, Prompt: prompt, Resumed: resumed, Env: s.agentEnv(r), Event: s.event}
	step.Prepare() // its files, while the move is recorded
	started := time.Now().UTC()
	if _, err := s.cas(ctx, []run.State{run.StatePreparing, run.StateRunning, run.StateChecking},
		run.StateRunning, run.ReasonNone, fmt.Sprintf("attempt %d", n), func(r *run.Run) {
			r.Attempts = append(r.Attempts, run.Attempt{N: n, StartedAt: started, Resumed: resumed})
			if p.enforced != nil {
				r.Provenance.Enforced = p.enforced
			}
		}); err != nil {
		step.Abandon()
		return nextNothing, "", s.casFailed(ctx, err)
	}
	s.homeReady(p)
	actx, stopAttempt := context.WithCancelCause(ctx)
	// Past the budget the gateway answers the agent with an error; an
	// agent that does not end on its own is stopped after a grace. So is
	// one whose model server refuses the run's key or cannot be reached:
	// retries cannot mend either.
	p.gw.setStop(func(cause error) { time.AfterFunc(budgetGrace, func() { stopAttempt(cause) }) })
	res, err := step.Run(actx)
	p.gw.setStop(nil)
	stopAttempt(nil)
	if res.Outcome != nil {
		s.later(res.record) // with the next state change
	}
	if why := p.gw.exceeded(); why != "" && ctx.Err() == nil {
		s.finish(run.StateFailed, run.ReasonBudgetExceeded,
			why+"; the workspace is kept: continue with 'agentrun resume "+r.ID+" --max-cost N' (or --max-tokens N)")
		return nextNothing, "", nil
	}
	if why := p.gw.failing(); why != "" && ctx.Err() == nil && (res.Outcome == nil || res.Outcome.Reason != run.ReasonCompleted) {
		// Another attempt would meet the same server with the same key.
		// (An agent that finished all the same goes on to its checks.)
		s.finish(run.StateFailed, run.ReasonModelError,
			why+"; the workspace is kept: fix it (see 'agentrun doctor'), then continue with 'agentrun resume "+r.ID+"'")
		return nextNothing, "", nil
	}
	if s.diskExceeded(ctx, p.sb) {
		return nextNothing, "", nil
	}
	if err != nil {
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return nextNothing, "", nil
		}
		s.finish(run.StateFailed, run.ReasonSandboxError, err.Error())
		return nextNothing, "", err
	}
	if ctx.Err() != nil {
		s.stopped(ctx, "")
		return nextNothing, "", nil
	}
	if out := res.Outcome; out.Reason != run.ReasonCompleted {
		if last || out.Final {
			// (Final: another attempt would meet the same model error.)
			s.finish(run.StateFailed, out.Reason, describeOutcome(out))
			return nextNothing, "", nil
		}
		return nextAttempt, fmt.Sprintf("The previous attempt (%d) did not finish: %s.", n, describeOutcome(out)), nil
	}
	if len(r.Checks) == 0 {
		return nextExport, "", nil // nothing to check: straight on to export
	}
	return s.check(ctx, p, n, last)
}

// check moves the run to checking and runs the checks step after attempt
// n. For another attempt it returns what failed.
func (s *Supervisor) check(ctx context.Context, p *prepared, n int, last bool) (next, string, error) {
	r := p.run
	if _, err := s.cas(ctx, []run.State{run.StateRunning}, run.StateChecking, run.ReasonNone, "", nil); err != nil {
		return nextNothing, "", s.casFailed(ctx, err)
	}
	res, err := (&checksStep{Record: r, Layout: s.Layout, Sandbox: p.sb, N: n, Event: s.event}).Run(ctx)
	if err == nil && len(res.Results) > 0 {
		s.later(res.record) // with the next state change
	}
	if ctx.Err() != nil {
		s.stopped(ctx, "")
		return nextNothing, "", nil
	}
	if s.diskExceeded(ctx, p.sb) {
		return nextNothing, "", nil
	}
	if err != nil {
		s.finish(run.StateFailed, run.ReasonSandboxError, err.Error())
		return nextNothing, "", err
	}
	failed := failedChecks(s.Layout, r.ID, n, res.Results)
	if failed == "" {
		return nextExport, "", nil
	}
	if last {
		s.finish(run.StateFailed, run.ReasonChecksFailed, checksSummary(res.Results))
		return nextNothing, "", nil
	}
	return nextAttempt, failed, nil
}

// export moves the run from one of the states from to exporting and runs
// the export step, whose record of the result is the move to succeeded.
func (s *Supervisor) export(ctx context.Context, p *prepared, from []run.State) error {
	r := p.run
	if _, err := s.cas(ctx, from, run.StateExporting, run.ReasonNone, "", nil); err != nil {
		return s.casFailed(ctx, err)
	}
	step := &exportStep{Record: r, Layout: s.Layout, Workspace: p.ws, Export: s.Export,
		Force: len(r.Attempts) > 0 && p.resumed, Ident: p.ident, Event: s.event, FinishWithin: s.RecordWithin,
		Finish: func(ctx context.Context, res *run.ExportResult) error {
			_, err := s.cas(ctx, []run.State{run.StateExporting}, run.StateSucceeded, run.ReasonCompleted, "", func(r *run.Run) {
				r.Commit, r.Patch, r.Result = res.Commit, res.Patch, res
			})
			return err
		}}
	res, err := step.Run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			s.stopped(ctx, "")
			return nil
		}
		s.finish(run.StateFailed, run.ReasonExportFailed, err.Error()+"; the workspace is kept: once the cause is gone, 'agentrun resume "+r.ID+"' exports it again (with --task TEXT, the agent gets another attempt first)")
		return err
	}
	if res.NoChanges {
		s.finishNoChanges(res.Refused)
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

// casFailed ends the run after a state compare-and-set that did not hold:
// one lost to a cancel (or made while the run's context ended) stops the
// run as the cause says; any other error is returned.
func (s *Supervisor) casFailed(ctx context.Context, err error) error {
	if errors.Is(err, run.ErrConflict) || ctx.Err() != nil {
		s.stopped(ctx, "")
		return nil
	}
	return err
}

// diskExceeded ends the run disk_exceeded when its sandbox killed itself
// past the disk bound it samples.
func (s *Supervisor) diskExceeded(ctx context.Context, sb sandbox.Sandbox) bool {
	err := sandbox.Exceeded(sb)
	if err == nil || ctx.Err() != nil {
		return false
	}
	s.finish(run.StateFailed, run.ReasonDiskExceeded, err.Error()+"; raise the bound of a new run with --disk or --disk-inodes (config keys disk, disk_inodes)")
	return true
}

func (s *Supervisor) getenv(k string) string { return s.Handoff.Env[k] }

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

// watchCancel ends ctx when the run is cancelled or leaves the states this
// supervisor drives (a cancel CAS by the CLI).
func (s *Supervisor) watchCancel(ctx context.Context, cancel context.CancelCauseFunc) {
	every := cancelPoll
	if s.Cancelled != nil {
		every = cancelBackupPoll
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Cancelled:
			cancel(errCancelRequested)
			return
		case <-t.C:
		}
		r, err := s.Store.Get(ctx, s.ID)
		if err != nil {
			continue
		}
		if r.CancelRequested || r.State.Terminal() {
			cancel(errCancelRequested)
			return
		}
	}
}

// prewarm starts what the run's backend can start of the sandbox before
// its spec is known (the native init), beside the slot, the workspace and
// the servers, or keeps what this process started with (Prespawn), for
// ctx: the run's end ends it if no sandbox took it. What another backend
// started ahead (Prespawn guessed the backend) ends now.
func (s *Supervisor) prewarm(ctx context.Context, backend string) {
	for name, b := range s.Backends {
		if pw, ok := b.(sandbox.Prewarmer); ok && name != backend {
			pw.Prewarm(ended)
		}
	}
	if pw, ok := s.Backends[backend].(sandbox.Prewarmer); ok {
		pw.Prewarm(ctx)
	}
}

// ended is a context that has ended: Prewarm(ended) gives up what a
// backend started ahead.
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// stopped ends the run after its context ended, with the state the cause
// calls for. from is the state to move from ("" = any active state).
func (s *Supervisor) stopped(ctx context.Context, from run.State) {
	state, reason, msg := run.StateInterrupted, run.ReasonInterrupted, "the supervisor was stopped; resume the run with 'agentrun resume "+s.ID+"'"
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errRunTimeout):
		state, reason, msg = run.StateFailed, run.ReasonTimeout, errRunTimeout.Error()
	case errors.Is(cause, errCancelRequested):
		state, reason, msg = run.StateCancelled, run.ReasonCancelled, "cancelled"
	default:
		if r, err := s.Store.Get(context.Background(), s.ID); err == nil && r.CancelRequested {
			state, reason, msg = run.StateCancelled, run.ReasonCancelled, "cancelled"
		}
	}
	if from != "" {
		s.transition([]run.State{from}, state, reason, msg)
		return
	}
	s.finish(state, reason, msg)
}

// finish moves the run from whatever active state to an end state. A lost
// compare-and-set (a cancel got there first) is fine.
func (s *Supervisor) finish(state run.State, reason run.Reason, msg string) {
	s.transition(activeStates, state, reason, msg)
}

func (s *Supervisor) transition(from []run.State, state run.State, reason run.Reason, msg string) {
	if state.Terminal() {
		s.releaseResources()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cas(ctx, from, state, reason, msg, nil); err != nil && !errors.Is(err, run.ErrConflict) {
		fmt.Fprintf(os.Stderr, "supervise %s: transition to %s: %v\n", s.ID, state, err)
	}
}

// clearSupervisor forgets this process in the record once it is done.
func (s *Supervisor) clearSupervisor() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pending := s.takePending()
	_, _ = s.Store.Update(ctx, s.ID, func(r *run.Run) error {
		for _, p := range pending {
			p(r)
		}
		if r.Supervisor != nil && r.Supervisor.PID == os.Getpid() {
			r.Supervisor = nil
		}
		return nil
	})
}

// appendProgress is how st journals a run's progress: without waiting
// for it to be durable where st can (run.LazyJournal), the next state
// event's fsync covering it.
func appendProgress(st run.Store) func(ctx context.Context, id string, e run.Event) (run.Event, error) {
	if lj, ok := st.(run.LazyJournal); ok {
		return lj.AppendEventLazy
	}
	return st.AppendEvent
}

// event journals e; the journal is best effort from here (a failing
// journal must not kill the run), as progress (appendProgress).
func (s *Supervisor) event(e run.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := appendProgress(s.Store)(ctx, s.ID, e); err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: journal %s: %v\n", s.ID, e.Type, err)
	}
}
