package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// TestCtrlCWhileWaitingLeavesRunRunning: SIGINT to a waiting submit exits
// 130 and says how to follow the run again; the run goes on and ends.
func TestCtrlCWhileWaitingLeavesRunRunning(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(e.bin, "submit", "--sandbox", "host", "--agent-cmd", "sleep 1; echo x > x.txt", "--wait", "t")
	cmd.Dir, cmd.Env = e.repo, e.vars
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	deadline := time.Now().Add(20 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		if ids := e.runIDs(); len(ids) == 1 {
			if r, err := e.store().Get(context.Background(), ids[0]); err == nil && r.State == run.StateRunning {
				id = ids[0]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("the run did not start")
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, se.String())
	}
	if !strings.Contains(se.String(), "agentrun logs -f "+id) {
		t.Fatalf("no hint how to follow again: %s", se.String())
	}
	r := e.waitFor(id, "the run to end", func(r *run.Run) bool { return r.State.Terminal() })
	if r.State != run.StateSucceeded {
		t.Fatalf("after Ctrl-C the run ended %s: %s", r.State, r.Message)
	}
}

// TestWaitEndsWhenItsSupervisorIsKilled: a waiting submit hears its
// run's supervisor through the socket they share and polls only seldom
// meanwhile; kill -9 of the supervisor closes that socket, and the wait
// reads the run then, finds it interrupted and ends, without waiting for
// a slow poll.
func TestWaitEndsWhenItsSupervisorIsKilled(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "host", "--agent-cmd", "sleep 300", "--wait", "t")
	cmd.Dir, cmd.Env = e.repo, e.vars
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var r *run.Run
	deadline := time.Now().Add(20 * time.Second)
	for r == nil && time.Now().Before(deadline) {
		if ids := e.runIDs(); len(ids) == 1 {
			if got, err := e.store().Get(context.Background(), ids[0]); err == nil && got.State == run.StateRunning && got.Supervisor != nil {
				r = got
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r == nil {
		_ = cmd.Process.Kill()
		t.Fatal("the run did not start")
	}
	killed := time.Now()
	if err := syscall.Kill(r.Supervisor.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the wait did not end within 30 s of its supervisor's kill\n%s", se.String())
	}
	t.Logf("the wait ended %v after the kill", time.Since(killed).Round(time.Millisecond))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != catalog.ExitRunFailed {
		t.Fatalf("exit %v, want %d\n%s\n%s", err, catalog.ExitRunFailed, so.String(), se.String())
	}
	if !strings.Contains(so.String(), `"status": "interrupted"`) {
		t.Fatalf("the wait did not report the run interrupted:\n%s\n%s", so.String(), se.String())
	}
}

func TestAmbiguousID(t *testing.T) {
	e := newEnv(t)
	st := e.store()
	ctx := context.Background()
	for _, id := range []string{"abc0000001", "abc0000002"} {
		r := &run.Run{ID: id, State: run.StateFailed, Task: "t"}
		if err := st.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"resume", "cancel"} {
		res := e.run(cmd, "--json", "abc")
		must(t, res, 3)
		if !strings.Contains(res.stdout, `"ambiguous_id"`) {
			t.Fatalf("%s: %s", cmd, res.stdout)
		}
		if r, _ := st.Get(ctx, "abc0000001"); r.State != run.StateFailed {
			t.Fatalf("%s changed the run: %s", cmd, r.State)
		}
	}
}
