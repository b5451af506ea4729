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
		url := newURL(t)
		l := layout.Layout{Home: t.TempDir()}
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		var workers []*worker.Local
		var mu sync.Mutex
		claims := map[string]int{}
		for range 2 {
			be, err := wire.OpenServer(ctx, url, server.BackendOptions{LeaseTTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			w := &worker.Local{Home: supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true},
				Deps: be.SupervisorDeps(l), Slots: 2, Getenv: os.Getenv,
				Claimed: func(r *run.Run, _ time.Duration) { mu.Lock(); claims[r.ID]++; mu.Unlock() }}
			workers = append(workers, w)
		}
		st := workers[0].Home.Store
		svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}, DefaultBackend: "host", Agents: wire.Agents()}
		var ids []string
		for range 8 {
			r, _, err := svc.Plan(ctx, submit.Request{Repo: repo, Task: "t", AgentCmd: "echo $$ > b.txt", Sandbox: "host", Attempts: 1, Getenv: os.Getenv})
			if err != nil {
				t.Fatal(err)
			}
			if err := supervisor.Start(ctx, workers[0].Home, r, supervisor.StartOptions{}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		for _, w := range workers {
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Stop(context.Background()) })
		}
		deadline := time.Now().Add(60 * time.Second)
		for _, id := range ids {
			for {
				r, err := st.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if r.State.Terminal() {
					if r.State != run.StateSucceeded || len(r.Attempts) != 1 {
						t.Errorf("run %s: %s (%s), %d attempts", id, r.State, r.Message, len(r.Attempts))
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run %s is still %s", id, r.State)
				}
				time.Sleep(20 * time.Millisecond)
			}
			evs, _ := st.Events(ctx, id, 0)
			preparing := 0
			for _, e := range evs {
				if e.Type == run.EventState && e.State == run.StatePreparing {
					preparing++
				}
			}
			mu.Lock()
			n := claims[id]
			mu.Unlock()
			if preparing != 1 || n != 1 {
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
		var mu sync.Mutex
		claims := map[string]int{}
		var workers []*worker.Local
		for range 2 {
			be, err := wire.OpenServer(ctx, url, server.BackendOptions{LeaseTTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Close() })
			// One slot between both workers: the second run waits for it.
			workers = append(workers, &worker.Local{Home: supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true},
				Deps: be.SupervisorDeps(l), Slots: 1, Getenv: os.Getenv,
				Claimed: func(r *run.Run, _ time.Duration) { mu.Lock(); claims[r.ID]++; mu.Unlock() }})
		}
		st := workers[0].Home.Store
		svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}, DefaultBackend: "host", Agents: wire.Agents()}
		var ids []string
		for _, cmd := range []string{"sleep 3; echo a > b.txt", "echo b > b.txt"} {
			r, _, err := svc.Plan(ctx, submit.Request{Repo: repo, Task: "t", AgentCmd: cmd, Sandbox: "host", Attempts: 1, Getenv: os.Getenv})
			if err != nil {
				t.Fatal(err)
			}
			if err := supervisor.Start(ctx, workers[0].Home, r, supervisor.StartOptions{}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		for _, w := range workers {
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Stop(context.Background()) })
		}
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
			var r *run.Run
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if r, err = st.Get(ctx, id); err != nil {
					t.Fatal(err)
				}
				if r.State.Terminal() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run %s is still %s", id, r.State)
				}
			}
			if r.State != run.StateSucceeded || len(r.Attempts) != 1 {
				t.Errorf("run %s: %s (%s), %d attempts", id, r.State, r.Message, len(r.Attempts))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if claims[ids[0]] != 1 || claims[ids[1]] != 2 {
			t.Errorf("claimed %d and %d times, want 1 and 2 (the second again after its lease expired)", claims[ids[0]], claims[ids[1]])
		}
	})
}
