package worker

// remote.go: an agent host that joins a team server (agentrun worker
// --server). It claims the runs it can execute over the API, executes
// each with the same supervisor as Lite on a store that writes through to
// the server (remote_store.go), and heartbeats: the server renews the
// leases of its runs only while the heartbeats come. A run the server
// says this host lost, or every run once the heartbeats have failed for
// longer than the lease TTL, is abandoned: its sandbox stops and nothing
// of it is kept here.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// Remote is an agent host of a team server.
type Remote struct {
	// Client calls the server with the host's credential.
	Client *client.Client
	// Data is the host's data directory: its runs while they are here
	// and its cache of the projects.
	Data string
	// Deps are the supervisor's seams for runs kept in st under l: the
	// host's own coordinator (flocks under l) and backends.
	Deps func(st run.Store, l layout.Layout) supervisor.Deps
	// Slots is how many runs it executes at once (at least 1).
	Slots int
	// Backends are the sandbox backends it can start.
	Backends []string
	// Agents are the agent CLI profiles: each claim names those whose CLI
	// is on this host's PATH (Getenv's), and a claimed run's profile CLI
	// is the one found there (remote_job.go).
	Agents agent.Catalog
	// HostID and Key are the host's id and private sealing key: the
	// server's values of a run's variables (its provider keys) come in the
	// claim sealed to it, and are opened in memory only (remote_job.go).
	HostID string
	Key    *seal.Key
	// OwnEnv are the names of variables this host fills from its own
	// environment (Getenv) where the server sends no value; by default
	// none: a run gets the server's values only.
	OwnEnv []string
	Getenv func(string) string
	// Sweepers remove the sandboxes an earlier start left (a host killed
	// with its runs), by backend name.
	Sweepers map[string]sandbox.Sweeper
	Log      *slog.Logger

	mu       sync.Mutex
	running  map[string]*job
	projects map[string]*sync.Mutex
	bases    map[string]bool // "REPO BASE": the bases the caches hold
	dropped  map[string]int  // by project: runs that left its cache since its last prune
	ttl      time.Duration
	wg       sync.WaitGroup
	free     chan struct{} // a slot was freed
	beat     chan struct{} // a run was claimed: heartbeat at once
	stop     context.CancelCauseFunc
}

func (w *Remote) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

func (w *Remote) lockProject(name string) func() {
	w.mu.Lock()
	if w.projects == nil {
		w.projects = map[string]*sync.Mutex{}
	}
	l := w.projects[name]
	if l == nil {
		l = &sync.Mutex{}
		w.projects[name] = l
	}
	w.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (w *Remote) forget(j *job) {
	w.mu.Lock()
	if w.running[j.id] == j {
		delete(w.running, j.id)
	}
	w.mu.Unlock()
	select {
	case w.free <- struct{}{}:
	default:
	}
}

func (w *Remote) jobs() []*job {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*job, 0, len(w.running))
	for _, j := range w.running {
		out = append(out, j)
	}
	return out
}

func (w *Remote) leaseTTL() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ttl <= 0 {
		return 15 * time.Second
	}
	return w.ttl
}

func (w *Remote) setTTL(ms int64) {
	if ms > 0 {
		w.mu.Lock()
		w.ttl = time.Duration(ms) * time.Millisecond
		w.mu.Unlock()
	}
}

// Run executes runs until ctx ends, then stops the runs it executes
// (they end interrupted and are queued again for another host) and
// returns once their supervisors have ended.
func (w *Remote) Run(ctx context.Context) error {
	w.mu.Lock()
	w.running = map[string]*job{}
	w.free = make(chan struct{}, 1)
	w.beat = make(chan struct{}, 1)
	w.mu.Unlock()
	if w.Slots < 1 {
		w.Slots = 1
	}
	if err := w.reconcile(ctx); err != nil {
		return err
	}
	// A refused credential (the host was revoked) stops the host: its
	// runs are another's already.
	ctx, w.stop = context.WithCancelCause(ctx)
	hbDone := make(chan struct{})
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	go func() { defer close(hbDone); w.heartbeats(hbCtx) }()
	w.claims(ctx)
	w.wg.Wait()
	stopHB()
	<-hbDone
	if err := context.Cause(ctx); refused(err) {
		return err
	}
	return nil
}

// refused reports the server's refusal of the host's credential.
func refused(err error) bool {
	e, ok := catalog.As(err)
	return ok && e.Code == catalog.HostRefused.Code
}

// reconcile settles what a previous life of this host left: each run it
// was executing is given back to the server (which queues it again, for
// this host or another, as a resume) if the host still holds it, and
// dropped here either way.
func (w *Remote) reconcile(ctx context.Context) error {
	l := layout.Layout{Home: w.Data}
	// Nothing runs here yet: whatever sandbox is left is an earlier
	// start's, whose agent may still be at work in a dropped workspace.
	for name, sw := range w.Sweepers {
		swept, err := sw.Sweep(ctx, l.SandboxState, func(string) bool { return false })
		if err != nil || len(swept) > 0 {
			w.log().Info("swept the sandboxes an earlier start left", "backend", name, "swept", len(swept), "error", fmt.Sprint(err))
		}
	}
	left := localClaims(l)
	if len(left) == 0 {
		return nil
	}
	var in server.HeartbeatRequest
	for _, c := range left {
		in.Runs = append(in.Runs, server.HeldRun{ID: c.ID, Token: c.Token})
	}
	b, err := w.Client.Post(ctx, "/v1/hosts/heartbeat", in)
	if err != nil {
		return err
	}
	var hb server.Heartbeat
	if err := json.Unmarshal(b, &hb); err != nil {
		return err
	}
	w.setTTL(hb.LeaseTTLMS)
	lost := map[string]bool{}
	for _, id := range hb.Lost {
		lost[id] = true
	}
	for _, c := range left {
		if !lost[c.ID] {
			if _, err := w.Client.Post(ctx, "/v1/hosts/runs/"+c.ID+"/release", server.ReleaseRequest{Token: c.Token}); err != nil {
				w.log().Error("give back", "run", c.ID, "error", err.Error())
			}
		}
		w.log().Info("run left by an earlier start", "run", c.ID, "held", !lost[c.ID])
		_ = os.RemoveAll(l.RunDir(c.ID))
		w.dropBranch(ctx, c.Project, "agentrun/"+c.ID)
	}
	return nil
}

// claims asks for runs while it has free slots, until ctx ends.
func (w *Remote) claims(ctx context.Context) {
	for ctx.Err() == nil {
		if len(w.jobs()) >= w.Slots {
			select {
			case <-ctx.Done():
				return
			case <-w.free:
			}
			continue
		}
		b, err := w.Client.Post(ctx, "/v1/hosts/claim", server.ClaimRequest{Backends: w.Backends, Agents: w.installed(),
			WaitMS: server.MaxClaimWait.Milliseconds()})
		var c server.Claim
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if refused(err) {
			w.log().Error("the server refused this host", "error", err.Error())
			w.stop(err)
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				w.log().Warn("claim", "error", err.Error())
				sleep(ctx, time.Second)
			}
			continue
		}
		w.setTTL(c.LeaseTTLMS)
		if c.Run == nil {
			continue
		}
		j := w.claimed(newJob(c.Run.ID, c.Token, c.Project))
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.execute(ctx, j, c)
		}()
	}
}

// claimed takes claimed run j on here: the heartbeat carries it from
// rebeatDelay on.
func (w *Remote) claimed(j *job) *job {
	w.mu.Lock()
	old := w.running[j.id]
	w.running[j.id] = j
	w.mu.Unlock()
	if old != nil {
		// The server gave the run here again: the earlier claim was
		// lost (this host stalled), and its remains go first.
		old.abandon(errLeaseLost)
		<-old.finished
	}
	w.log().Info("run claimed", "run", j.id, "token", j.token, "project", j.project)
	time.AfterFunc(rebeatDelay, w.rebeat)
	return j
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// heartbeats send a heartbeat every TTL/3 until ctx ends; its answer
// waits on the server for up to that long, to bring a cancel at once (a
// run claimed meanwhile sends the next heartbeat rebeatDelay later, to be
// waited on too). The runs the server says were lost are abandoned, those it
// says to cancel are cancelled; when no heartbeat got through for longer
// than the TTL, every run is abandoned: the server has given them to
// others.
func (w *Remote) heartbeats(ctx context.Context) {
	last := time.Now()
	var next time.Time
	for ctx.Err() == nil {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-w.beat:
		}
		t.Stop()
		sent := time.Now()
		hb, again, err := w.heartbeat(ctx, w.leaseTTL()/3)
		if err != nil && again && ctx.Err() == nil {
			// Cut short here for a run just claimed: the next goes at
			// once, with it.
			next = time.Now()
			continue
		}
		if refused(err) {
			w.log().Error("the server refused this host", "error", err.Error())
			w.stop(err)
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if time.Since(last) > w.leaseTTL() {
				for _, j := range w.jobs() {
					j.abandon(errors.New("this host could not reach the server for longer than the lease TTL"))
				}
			}
			w.log().Warn("heartbeat", "error", err.Error())
			next = sent.Add(w.leaseTTL() / 3)
			continue
		}
		// The leases were renewed when the heartbeat arrived.
		last = sent
		w.setTTL(hb.LeaseTTLMS)
		next = sent.Add(w.leaseTTL() / 3)
		if again {
			next = time.Now()
		}
		lost := map[string]bool{}
		for _, id := range hb.Lost {
			lost[id] = true
		}
		for _, j := range w.jobs() {
			if lost[j.id] {
				j.abandon(errLeaseLost)
			} else if slices.Contains(hb.Cancel, j.id) && j.cancelAsked() {
				// A new cancel came early: wait again at once for the
				// next (one told already is answered without waiting).
				next = time.Now()
				w.log().Info("run cancelled at the server", "run", j.id)
			}
		}
	}
}

// heartbeat sends one heartbeat with the runs here, whose answer may
// wait up to every. A run claimed while it waits ends the wait (again:
// the next heartbeat goes at once, with that run).
func (w *Remote) heartbeat(ctx context.Context, every time.Duration) (hb server.Heartbeat, again bool, err error) {
	in := server.HeartbeatRequest{Runs: []server.HeldRun{}, WaitMS: every.Milliseconds()}
	for _, j := range w.jobs() {
		in.Runs = append(in.Runs, server.HeldRun{ID: j.id, Token: j.token})
	}
	hctx, cancel := context.WithTimeout(ctx, every+w.leaseTTL()/2)
	defer cancel()
	waited := make(chan bool, 1)
	go func() {
		select {
		case <-w.beat:
			cancel()
			waited <- true
		case <-hctx.Done():
			waited <- false
		}
	}()
	b, err := w.Client.Post(hctx, "/v1/hosts/heartbeat", in)
	cancel()
	again = <-waited
	if err == nil {
		err = json.Unmarshal(b, &hb)
	}
	return hb, again, err
}

// rebeatDelay is how long after a claim the heartbeat that carries the
// run goes (cutting short the one waiting without it, whose leases stay
// renewed). Its lease is new, and it would compete for both processors
// with the run on its way to its agent's start (a server transaction and
// a new connection, on a busy machine a few milliseconds of that path); a
// cancel asked for within it reaches the run that much later.
const rebeatDelay = 50 * time.Millisecond

// rebeat sends the next heartbeat at once (a run was claimed).
func (w *Remote) rebeat() {
	select {
	case w.beat <- struct{}{}:
	default:
	}
}
