package supervisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// leftovers is a backend's sandboxes by run id, as a Sweeper sees them
// (the docker backend's own test sweeps real containers).
type leftovers struct {
	mu   sync.Mutex
	runs map[string]string // run id -> sandbox id
	dirs map[string]string // run id -> its sandbox's state dir
	err  error
}

func (l *leftovers) Sweep(ctx context.Context, stateDir func(string) string, active func(string) bool) ([]sandbox.Swept, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	var out []sandbox.Swept
	for runID, id := range l.runs {
		// Another data directory's sandbox is never this sweep's.
		if d, ok := l.dirs[runID]; ok && d != stateDir(runID) {
			continue
		}
		if !active(runID) {
			out = append(out, sandbox.Swept{ID: id, RunID: runID})
			delete(l.runs, runID)
		}
	}
	return out, nil
}

// TestReconcileSweeps: marking a run interrupted removes its sandbox in
// its own backend, and nobody else's; a live supervisor's run is left
// alone; a sweep that fails is journaled and the run is still marked.
func TestReconcileSweeps(t *testing.T) {
	ctx := context.Background()
	st, l := newStore(t)
	docker := &leftovers{runs: map[string]string{}}
	h := testHome(st, l)
	h.Sweepers = map[string]sandbox.Sweeper{"docker": docker}
	onDocker := func(r *run.Run) { r.Sandbox.Backend = "docker" }

	dead := createRun(t, st, run.StateRunning, onDocker)
	live := createRun(t, st, run.StateRunning, onDocker)
	native := createRun(t, st, run.StateRunning, func(r *run.Run) { r.Sandbox.Backend = "native" })
	docker.runs[dead.ID], docker.runs[live.ID], docker.runs["other-run"] = "c-dead", "c-live", "c-other"
	docker.dirs = map[string]string{dead.ID: l.SandboxState(dead.ID), live.ID: l.SandboxState(live.ID)}
	lk, err := flock.New(l.Home).Acquire(ctx, live.ID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()

	if nr, err := Reconcile(ctx, h, live); err != nil || nr.State != run.StateRunning {
		t.Fatalf("live: %v %v", err, nr.State)
	}
	if nr, err := Reconcile(ctx, h, native); err != nil || nr.State != run.StateInterrupted {
		t.Fatalf("native: %v %v", err, nr.State)
	}
	nr, err := Reconcile(ctx, h, dead)
	if err != nil || nr.State != run.StateInterrupted {
		t.Fatalf("dead: %v %v", err, nr.State)
	}
	if _, ok := docker.runs[dead.ID]; ok {
		t.Error("the dead supervisor's sandbox is still there")
	}
	if docker.runs[live.ID] == "" || docker.runs["other-run"] == "" {
		t.Errorf("other runs' sandboxes were removed: %v", docker.runs)
	}
	if !journaled(t, st, dead.ID, run.EventSandbox, "c-dead") {
		t.Error("the sweep is not in the journal")
	}

	docker.err = errors.New("engine hung")
	failing := createRun(t, st, run.StateRunning, onDocker)
	nr, err = Reconcile(ctx, h, failing)
	if err != nil || nr.State != run.StateInterrupted {
		t.Fatalf("a failing sweep: %v %v", err, nr.State)
	}
	if !journaled(t, st, failing.ID, run.EventWarning, "engine hung") {
		t.Error("the failed sweep is not in the journal")
	}
}

func journaled(t *testing.T, st run.Store, id, typ, text string) bool {
	t.Helper()
	evs, err := st.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == typ && (strings.Contains(e.Message, text) || strings.Contains(string(e.Data), text)) {
			return true
		}
	}
	return false
}
