package worker

// remote_job.go: one run an agent host executes, from its claim to its
// release: the base commit fetched into the host's cache of the project,
// the supervisor run on the write-through store, the logs shipped as
// they grow, and what is left here removed at the end.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// errLeaseLost is the cause of a run's context when its host lost the
// run's lease: the run was given to another host, and nothing of it here
// may reach the server any more.
var errLeaseLost = errors.New("this host lost the run's lease")

// job is one claimed run.
type job struct {
	id      string
	token   int64
	project string

	lostOnce sync.Once
	lost     chan struct{} // closed when the lease is lost
	why      error
	finished chan struct{} // closed once nothing of it is left here

	cancelOnce sync.Once
	cancelled  chan struct{} // closed when the server says its cancel was asked for

	mu     sync.Mutex
	cancel context.CancelCauseFunc
}

func newJob(id string, token int64, project string) *job {
	return &job{id: id, token: token, project: project, lost: make(chan struct{}), finished: make(chan struct{}),
		cancelled: make(chan struct{})}
}

// cancelAsked tells the run's supervisor at once that its cancel was asked
// for: it ends the run cancelled, and the host releases it, as usual.
// It reports whether this was the first time.
func (j *job) cancelAsked() (first bool) {
	j.cancelOnce.Do(func() { close(j.cancelled); first = true })
	return first
}

// abandon stops the run here for good: its lease is another's.
func (j *job) abandon(why error) {
	j.lostOnce.Do(func() {
		j.why = why
		close(j.lost)
		j.mu.Lock()
		cancel := j.cancel
		j.mu.Unlock()
		if cancel != nil {
			cancel(why)
		}
	})
}

// interrupt ends the run's context with why, the run still this host's:
// its supervisor stops, and the host releases it.
func (j *job) interrupt(why error) {
	j.mu.Lock()
	cancel := j.cancel
	j.mu.Unlock()
	if cancel != nil {
		cancel(why)
	}
}

func (j *job) isLost() bool {
	select {
	case <-j.lost:
		return true
	default:
		return false
	}
}

func (j *job) lostErr() error {
	if j.isLost() {
		return fmt.Errorf("run %s: %w", j.id, j.why)
	}
	return nil
}

// claimFile records a claim in the run's directory here, so that a host
// that restarts knows what it was executing.
type claimFile struct {
	ID      string `json:"id"`
	Token   int64  `json:"token"`
	Project string `json:"project"`
}

const claimName = "claim.json"

// execute runs claimed run c to its end here (or until it is lost or the
// host stops), then releases it and removes what is left of it here.
func (w *Remote) execute(ctx context.Context, j *job, c server.Claim) {
	l := layout.Layout{Home: w.Data}
	log := w.log().With("run", j.id, "token", j.token)
	defer func() {
		// Nothing of a run is kept here once it left: a lost run's
		// workspace and branch could otherwise be exported again.
		_ = os.RemoveAll(l.RunDir(j.id))
		w.dropBranch(context.WithoutCancel(ctx), j.project, "agentrun/"+j.id)
		close(j.finished)
		w.forget(j)
	}()
	err := w.run(ctx, j, c, l)
	if err != nil && !j.isLost() {
		log.Error("execute", "error", err.Error())
	}
	if j.isLost() {
		log.Warn("run abandoned", "why", j.why.Error())
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	if _, err := w.Client.Post(rctx, "/v1/hosts/runs/"+j.id+"/release", server.ReleaseRequest{Token: j.token}); err != nil {
		log.Error("release", "error", err.Error())
	}
}

// run prepares run c here and runs its supervisor.
func (w *Remote) run(ctx context.Context, j *job, c server.Claim, l layout.Layout) error {
	if err := os.MkdirAll(l.RunDir(j.id), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(claimFile{ID: j.id, Token: j.token, Project: j.project})
	if err := os.WriteFile(filepath.Join(l.RunDir(j.id), claimName), b, 0o600); err != nil {
		return err
	}
	repo, err := w.fetchBase(ctx, j, c.Run.Base)
	if err != nil {
		return err
	}
	sh := &shipper{c: w.Client, j: j, dir: l.RunDir(j.id)}
	st := &remoteStore{c: w.Client, j: j, repo: repo, patch: l.Patch(j.id), flush: sh.ship, locate: w.locate(c.Run),
		bundle: func(ctx context.Context, branch, base string) (string, error) {
			return w.bundleBranch(ctx, repo, l.RunDir(j.id), branch, base)
		}, log: w.log()}
	if r, err := clone(c.Run); err == nil {
		st.prime(st.local(r))
	}
	deps := w.Deps(st, l)
	deps.RecordWithin = recordWithin
	if deps.Layers != nil {
		// This run's cache: a spare it makes for the next run on the
		// base is finished before the run is let go.
		defer deps.Layers.Wait()
	}
	lease, err := deps.Coord.Acquire(ctx, j.id, 0)
	if err != nil {
		return fmt.Errorf("local lease: %w", err)
	}
	defer lease.Release()
	if err := deps.Coord.Enqueue(ctx, lease, c.Run.Seq); err != nil {
		return fmt.Errorf("local queue: %w", err)
	}
	env, err := w.handoffEnv(j, c)
	if err != nil {
		return err
	}
	ho := supervisor.Handoff{Note: c.Note, Ended: c.Ended, Env: env}
	shipCtx, stopShip := context.WithCancel(context.WithoutCancel(ctx))
	shipped := make(chan struct{})
	go func() { defer close(shipped); sh.loop(shipCtx) }()
	defer func() { stopShip(); <-shipped }()
	s := &supervisor.Supervisor{Deps: deps, ID: j.id, MaxParallel: max(w.Slots, 1), Handoff: ho, Lease: lease, InProcess: true,
		Cancelled: j.cancelled}
	t0 := time.Now()
	err = s.Run(j.ctx(ctx))
	st.drain()
	if !j.isLost() {
		sh.ship(context.WithoutCancel(ctx))
	}
	if r, gerr := st.Get(context.WithoutCancel(ctx), j.id); gerr == nil {
		w.log().Info("run ended", "run", j.id, "state", string(r.State), "reason", string(r.Reason), "took", time.Since(t0).String())
	}
	return err
}

// installed names the agent profiles whose CLI is on this host's PATH
// (nil without Agents: the claim does not say).
func (w *Remote) installed() []string {
	if w.Agents == nil || w.Getenv == nil {
		return nil
	}
	return submit.Installed(w.Agents, w.Getenv("PATH"))
}

// locate is how this host sees claimed run r's agent: its profile's CLI
// as found on this host's PATH, and what that needs visible read-only,
// in place of what the server found on its own PATH (or of the bare name
// when the server has none). nil: nothing to change (no profile, or its
// CLI is not here, which the run's attempt then reports).
func (w *Remote) locate(r *run.Run) func(*run.Run) {
	if r == nil || w.Getenv == nil {
		return nil
	}
	if r.Agent.Name == agent.CommandName {
		// An agent command's program (and its interpreter), as found on
		// this host's PATH; not here: the command's shell says so.
		visible, err := submit.CommandPreflight(r.Agent.Command, w.Getenv("PATH"))
		if err != nil {
			w.log().Warn("the agent command's program is not on this host's PATH", "run", r.ID, "error", err.Error())
		}
		return func(r *run.Run) { r.Sandbox.ReadOnlyPaths = slices.Clone(visible) }
	}
	p, ok := w.Agents.Lookup(r.Agent.Name)
	if !ok {
		return nil
	}
	l, err := submit.LocateProfile(p, w.Getenv)
	if err != nil {
		w.log().Warn("the run's agent CLI is not on this host's PATH", "run", r.ID, "agent", p.Name, "error", err.Error())
		return nil
	}
	for _, m := range l.Missing {
		w.log().Warn("a program the run's agent CLI runs is not on this host", "run", r.ID, "agent", p.Name, "warning", m.Warning())
	}
	return func(r *run.Run) {
		r.Agent.Binary, r.Agent.Launcher, r.Agent.Helpers = l.Binary, l.Launcher, slices.Clone(l.Helpers)
		r.Sandbox.ReadOnlyPaths = slices.Clone(l.Visible)
	}
}

// handoffEnv are the values of the variables claimed run c uses: the
// server's, opened from the claim in memory (they are never written here:
// the supervisor keeps its Handoff in memory too), and for the names in
// OwnEnv that the server sent no value for, and those that say how to
// reach a model server from here (gateway.NetEnv), this host's own.
func (w *Remote) handoffEnv(j *job, c server.Claim) (map[string]string, error) {
	env := map[string]string{}
	names := submit.HandoffNames(c.Run)
	if len(c.SealedEnv) > 0 {
		if w.Key == nil {
			return nil, fmt.Errorf("run %s: the server sealed its values to a key this host does not have", j.id)
		}
		values, err := w.Key.Open(seal.Info{Run: j.id, Host: w.HostID, Token: j.token}, c.SealedEnv)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", j.id, err)
		}
		for _, n := range names {
			if v := values[n]; v != "" && !slices.Contains(gateway.NetEnv, n) {
				env[n] = v
			}
		}
	}
	if w.Getenv != nil {
		for _, n := range names {
			if _, ok := env[n]; !ok && (slices.Contains(w.OwnEnv, n) || slices.Contains(gateway.NetEnv, n)) {
				if v := w.Getenv(n); v != "" {
					env[n] = v
				}
			}
		}
	}
	return env, nil
}

// ctx is the run's context: it ends when the host stops (the run ends
// interrupted, and is queued again by its release) or loses the lease.
func (j *job) ctx(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	j.mu.Lock()
	j.cancel = cancel
	j.mu.Unlock()
	if j.isLost() {
		cancel(j.why)
	}
	return ctx
}

// localClaims are the claims a previous life of this host left in its
// data directory.
func localClaims(l layout.Layout) []claimFile {
	ents, _ := os.ReadDir(l.Runs())
	var out []claimFile
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(l.RunDir(e.Name()), claimName))
		var c claimFile
		if err == nil && json.Unmarshal(b, &c) == nil && c.ID == e.Name() && run.ValidateID(c.ID) == nil {
			out = append(out, c)
		}
	}
	return out
}

// recordWithin is how long a host's export waits for the server to record
// it: the store's calls are retried until the server answers or the run's
// lease is lost (the heartbeat says so), so a server slowed by a burst of
// submits does not fail runs whose branch is ready. A server unreachable
// for this long has given the run to another host.
const recordWithin = 5 * time.Minute
