package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/wire"
	"github.com/agentrun/agentrun/internal/worker"
)

// TestWorkersShareTheQueue: two workers, each with a coordinator of its
// own on one database, execute every queued run exactly once.
func TestWorkersShareTheQueue(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		l := layout.Layout{Home: t.TempDir()}
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		var claims claimCounter
		workers := sharedWorkers(t, newURL(t), l, 2, &claims)
		st := workers[0].Home.Store
		cmds := make([]string, 8)
		for i := range cmds {
			cmds[i] = "echo $$ > b.txt"
		}
		ids := queueRuns(t, workers[0].Home, repo, cmds...)
		startWorkers(t, workers)
		deadline := time.Now().Add(60 * time.Second)
		for _, id := range ids {
			if r := waitEnded(t, st, id, deadline); r.State != run.StateSucceeded || len(r.Attempts) != 1 {
				t.Errorf("run %s: %s (%s), %d attempts", id, r.State, r.Message, len(r.Attempts))
			}
			evs, _ := st.Events(ctx, id, 0)
			preparing := 0
			for _, e := range evs {
				if e.Type == run.EventState && e.State == run.StatePreparing {
					preparing++
				}
			}
			if n := claims.of(id); preparing != 1 || n != 1 {
				t.Errorf("run %s was prepared %d times, claimed %d times", id, preparing, n)
			}
			if _, err := os.Stat(filepath.Join(l.RunDir(id), "result.patch")); err != nil {
				t.Errorf("run %s: %v", id, err)
			}
		}
	})
}

// TestStopInterrupts: a stopped worker leaves the run it executes
// interrupted, resumable; Stop before Start and a second Stop are fine.
func TestStopInterrupts(t *testing.T) {
	ctx := context.Background()
	if err := (&worker.Local{}).Stop(ctx); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	be, err := wire.OpenServer(ctx, sqltest.SQLite(t), server.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	l := layout.Layout{Home: t.TempDir()}
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	w := &worker.Local{Home: supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true}, Deps: be.SupervisorDeps(l), Slots: 1}
	svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}, DefaultBackend: "host", Agents: wire.Agents()}
	r, _, err := svc.Plan(ctx, submit.Request{Repo: repo, Task: "t", AgentCmd: "sleep 30", Sandbox: "host", Attempts: 1, Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	if err := supervisor.Start(ctx, w.Home, r, supervisor.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		cur, _ := be.Store.Get(ctx, r.ID)
		if cur.State == run.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s", r.ID, cur.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	cur, _ := be.Store.Get(ctx, r.ID)
	if cur.State != run.StateInterrupted || !cur.State.Resumable() {
		t.Fatalf("after Stop: %s %s", cur.State, cur.Message)
	}
	if w.Running() != 0 {
		t.Errorf("%d runs still running", w.Running())
	}
}

// TestReconcileOnly: a worker without slots claims nothing, and marks
// interrupted the runs that lost their supervisor.
func TestReconcileOnly(t *testing.T) {
	ctx := context.Background()
	be, err := wire.OpenServer(ctx, sqltest.SQLite(t), server.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	l := layout.Layout{Home: t.TempDir()}
	h := supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true}
	queued := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "waits"}
	lost := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "lost"}
	for _, r := range []*run.Run{queued, lost} {
		if err := be.Store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := be.Store.Transition(ctx, lost.ID, []run.State{run.StateQueued}, run.StateRunning, run.ReasonNone, ""); err != nil {
		t.Fatal(err)
	}
	w := &worker.Local{Home: h, Deps: be.SupervisorDeps(l), Slots: 0, Reconcile: 10 * time.Millisecond}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, _ := be.Store.Get(ctx, lost.ID)
		if r.State == run.StateInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost run is still %s", r.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r, _ := be.Store.Get(ctx, queued.ID); r.State != run.StateQueued || r.Supervisor != nil {
		t.Fatalf("the queued run: %s %+v", r.State, r.Supervisor)
	}
}

// TestLeaseLostWhileWaitingForASlot: a run whose lease expires while it
// waits for a slot (its renewals stalled) is not ended: it stays queued,
// unclaimed again, and runs once a worker takes it again.
func TestLeaseLostWhileWaitingForASlot(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		url := newURL(t)
		l := layout.Layout{Home: t.TempDir()}
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		var claims claimCounter
		// One slot between both workers: the second run waits for it.
		workers := sharedWorkers(t, url, l, 1, &claims)
		st := workers[0].Home.Store
		ids := queueRuns(t, workers[0].Home, repo, "sleep 3; echo a > b.txt", "echo b > b.txt")
		startWorkers(t, workers)
		waiting := func() bool {
			a, _ := st.Get(ctx, ids[0])
			b, _ := st.Get(ctx, ids[1])
			return a.State == run.StateRunning && b.State == run.StateQueued && b.Supervisor != nil
		}
		for deadline := time.Now().Add(30 * time.Second); !waiting(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the second run never waited for the slot")
			}
		}
		// The waiting run's lease expires as if its holder had stalled.
		db, err := sqldb.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Write().ExecContext(ctx, `UPDATE coord_leases SET expires_at = 1 WHERE run_id = $1`, ids[1]); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if r := waitEnded(t, st, id, time.Now().Add(60*time.Second)); r.State != run.StateSucceeded || len(r.Attempts) != 1 {
				t.Errorf("run %s: %s (%s), %d attempts", id, r.State, r.Message, len(r.Attempts))
			}
		}
		if a, b := claims.of(ids[0]), claims.of(ids[1]); a != 1 || b != 2 {
			t.Errorf("claimed %d and %d times, want 1 and 2 (the second again after its lease expired)", a, b)
		}
	})
}

// claimCounter counts the claims of each run, by every worker it is
// given to.
type claimCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *claimCounter) claimed(r *run.Run, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.ID]++
}

func (c *claimCounter) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// sharedWorkers makes two workers of data directory l with slots each,
// each with a coordinator of its own (lease TTL 2 s) on the database at
// url, counting their claims in claims.
func sharedWorkers(t *testing.T, url string, l layout.Layout, slots int, claims *claimCounter) []*worker.Local {
	t.Helper()
	var workers []*worker.Local
	for range 2 {
		be, err := wire.OpenServer(context.Background(), url, server.BackendOptions{LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		workers = append(workers, &worker.Local{Home: supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true},
			Deps: be.SupervisorDeps(l), Slots: slots, Getenv: os.Getenv, Claimed: claims.claimed})
	}
	return workers
}

// queueRuns queues a run of each agent command on repo (host sandbox, one
// attempt) in h, in order, and returns their ids.
func queueRuns(t *testing.T, h supervisor.Home, repo string, cmds ...string) []string {
	t.Helper()
	ctx := context.Background()
	svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}, DefaultBackend: "host", Agents: wire.Agents()}
	var ids []string
	for _, cmd := range cmds {
		r, _, err := svc.Plan(ctx, submit.Request{Repo: repo, Task: "t", AgentCmd: cmd, Sandbox: "host", Attempts: 1, Getenv: os.Getenv})
		if err != nil {
			t.Fatal(err)
		}
		if err := supervisor.Start(ctx, h, r, supervisor.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// startWorkers starts workers, each stopped when the test ends.
func startWorkers(t *testing.T, workers []*worker.Local) {
	t.Helper()
	for _, w := range workers {
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop(context.Background()) })
	}
}

// waitEnded waits until run id has ended, failing the test at deadline.
func waitEnded(t *testing.T, st run.Store, id string, deadline time.Time) *run.Run {
	t.Helper()
	for {
		r, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State.Terminal() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s", id, r.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
