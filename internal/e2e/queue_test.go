package e2e

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// TestMaxParallelTwoRunsAtOnce: with two slots, two runs that each wait
// for the other's marker both finish.
func TestMaxParallelTwoRunsAtOnce(t *testing.T) {
	e := newEnv(t)
	dir := e.root
	agent := func(me, other string) string {
		return "touch " + filepath.Join(dir, me) + "; i=0; while [ ! -f " + filepath.Join(dir, other) +
			" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; test -f " + filepath.Join(dir, other) + " && echo ok > ok.txt"
	}
	a, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "2", "--agent-cmd", agent("a", "b"), "a")
	must(t, res, 0)
	b, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "2", "--agent-cmd", agent("b", "a"), "b")
	must(t, res, 0)
	for _, id := range []string{a.ID, b.ID} {
		r := e.waitFor(id, "the run to end", func(r *run.Run) bool { return r.State.Terminal() })
		if r.State != run.StateSucceeded {
			t.Fatalf("run %s: %s (%s)", id, r.State, r.Reason)
		}
	}
}

// TestKilledQueuedSupervisor: a queued run whose supervisor is killed is
// interrupted (not left queued forever, not blocking the queue), and
// resume starts it.
func TestKilledQueuedSupervisor(t *testing.T) {
	e := newEnv(t)
	blocker, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd", "sleep 300", "blocker")
	must(t, res, 0)
	e.waitFor(blocker.ID, "the blocker to run", func(r *run.Run) bool { return r.State == run.StateRunning })
	d, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd", "echo x > x.txt", "queued")
	must(t, res, 0)
	r := e.waitFor(d.ID, "its supervisor", func(r *run.Run) bool { return r.Supervisor != nil })
	_ = syscall.Kill(r.Supervisor.PID, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); alive(r.Supervisor.PID) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// A later run is not held up by the dead one's queue entry.
	later, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd", "echo y > y.txt", "later")
	must(t, res, 0)
	must(t, e.run("cancel", blocker.ID), 0)
	if r := e.waitFor(later.ID, "the later run", func(r *run.Run) bool { return r.State.Terminal() }); r.State != run.StateSucceeded {
		t.Fatalf("later run %s", r.State)
	}
	res = e.run("status", "--json", d.ID)
	must(t, res, 0)
	if got := e.get(d.ID); got.State != run.StateInterrupted {
		t.Fatalf("killed queued run is %s", got.State)
	}
	must(t, e.run("resume", "--wait", d.ID), 0)
	if got := e.get(d.ID); got.State != run.StateSucceeded {
		t.Fatalf("resumed run is %s", got.State)
	}
}
