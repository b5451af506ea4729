package supervisor

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/run"
)

// TestCancelNeverSignalsAReusedPID: the record names a supervisor PID
// that now belongs to another process (a `sleep`), while a live
// supervisor holds the run's lock (as when a resumed run's new supervisor
// has not yet recorded itself). Cancel signals the PID only when its start
// time is the recorded one: the other process is never signalled.
func TestCancelNeverSignalsAReusedPID(t *testing.T) {
	ctx := context.Background()
	st, l := newStore(t)
	start := func() (*exec.Cmd, <-chan error) {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
	cancelWith := func(pid int, procStart uint64) {
		t.Helper()
		r := createRun(t, st, run.StateRunning, func(r *run.Run) {
			r.Supervisor = &run.SupervisorInfo{PID: pid, Host: "here", StartedAt: time.Now(), ProcStart: procStart}
		})
		lk, err := flock.New(l.Home).Acquire(context.Background(), r.ID, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release()
		if _, err := Cancel(ctx, testHome(st, l), r.ID); err != nil {
			t.Fatal(err)
		}
	}

	for name, wrong := range map[string]func(real uint64) uint64{
		"other start time":   func(real uint64) uint64 { return real + 1 },
		"unknown start time": func(uint64) uint64 { return 0 },
	} {
		cmd, done := start()
		real, err := procStart(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		cancelWith(cmd.Process.Pid, wrong(real))
		select {
		case err := <-done:
			t.Fatalf("%s: the process that reused the PID was signalled: %v", name, err)
		case <-time.After(300 * time.Millisecond):
		}
	}

	// The recorded process itself is signalled.
	cmd, done := start()
	real, err := procStart(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cancelWith(cmd.Process.Pid, real)
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("the supervisor ended with %v, want SIGTERM", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the recorded supervisor was not signalled")
	}
}

// TestProcStartIsThisProcess: the start time read for a PID is stable and
// differs between processes started at different times.
func TestProcStartIsThisProcess(t *testing.T) {
	a, err := procStart(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("procStart(self) = %d, %v", a, err)
	}
	if b, _ := procStart(os.Getpid()); b != a {
		t.Fatalf("procStart changed: %d then %d", a, b)
	}
	if _, err := procStart(1 << 30); err == nil {
		t.Fatal("procStart of a PID that does not exist")
	}
}
