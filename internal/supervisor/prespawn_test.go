package supervisor

import (
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/supervisor/ahead"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// gone waits up to 10 s for process pid (a child this process reaps) to
// be gone.
func gone(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return true
		}
	}
	return false
}

// TestPrespawnTakesTheEarlySupervisor: Prespawn takes the supervisor the
// binary's initializer started (package ahead) when it is for the same
// data directory and binary; one for another data directory is let go (it
// exits) and a new one is started.
func TestPrespawnTakesTheEarlySupervisor(t *testing.T) {
	bin := testsupport.Agentrun(t)
	home := t.TempDir()
	getenv := func(k string) string {
		if k == "AGENTRUN_HOME" {
			return home
		}
		return ""
	}
	submit := []string{"agentrun", "submit", "fix it"}

	early := ahead.Early(submit, getenv, bin)
	if early == nil {
		t.Fatal("no supervisor started for a submit")
	}
	p, err := Prespawn(layout.Layout{Home: home}, bin, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.proc.Pid != early.Proc.Pid {
		t.Fatalf("Prespawn started pid %d beside the early %d", p.proc.Pid, early.Proc.Pid)
	}
	if ahead.Take() != nil {
		t.Fatal("the early supervisor can be taken twice")
	}
	p.Abandon()
	if !gone(early.Proc.Pid) {
		t.Fatalf("the abandoned supervisor %d did not exit", early.Proc.Pid)
	}

	early = ahead.Early(submit, getenv, bin)
	p, err = Prespawn(layout.Layout{Home: t.TempDir()}, bin, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abandon()
	if p.proc.Pid == early.Proc.Pid {
		t.Fatal("Prespawn took a supervisor started for another data directory")
	}
	if !gone(early.Proc.Pid) {
		t.Fatalf("the early supervisor %d for another data directory did not exit", early.Proc.Pid)
	}
	if gone := syscall.Kill(p.proc.Pid, 0) == syscall.ESRCH; gone {
		t.Fatal("the new supervisor is gone before its run")
	}
}
