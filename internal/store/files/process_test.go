package files_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The helper process: when the test binary is re-executed with
// AGENTRUN_STORE_HELPER set, TestHelperProcess acts as one of several
// processes sharing a store, and the test itself does nothing.
const (
	helperEnv     = "AGENTRUN_STORE_HELPER"
	helperHomeEnv = "AGENTRUN_STORE_HELPER_HOME"
	helperRunEnv  = "AGENTRUN_STORE_HELPER_RUN"
	helperNEnv    = "AGENTRUN_STORE_HELPER_N"
)

func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	if err := helper(os.Getenv(helperEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helper(mode string) error {
	home, id := os.Getenv(helperHomeEnv), os.Getenv(helperRunEnv)
	n, _ := strconv.Atoi(os.Getenv(helperNEnv))
	s, err := files.Open(home)
	if err != nil {
		return err
	}
	testsupport.AwaitGate() // start together
	switch mode {
	case "race":
		_, err := s.Transition(ctx, id, []run.State{run.StateQueued}, run.StatePreparing, "", strconv.Itoa(os.Getpid()))
		switch {
		case err == nil:
			fmt.Println("won")
		case errors.Is(err, run.ErrConflict):
			fmt.Println("lost")
		default:
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := s.Update(ctx, id, func(r *run.Run) error { r.MaxAttempts++; return nil }); err != nil {
				return err
			}
			if _, err := s.AppendEvent(ctx, id, run.NewEvent(run.EventTool, strconv.Itoa(os.Getpid()), nil)); err != nil {
				return err
			}
		}
		return nil
	case "delete":
		return s.Delete(ctx, id)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// runHelpers runs procs helper processes in mode, started together, and
// returns their combined stdout once all have exited.
func runHelpers(t *testing.T, mode, home, id string, procs, n int, cred func(*exec.Cmd)) string {
	t.Helper()
	return testsupport.RunHelpers(t, "TestHelperProcess", procs, []string{helperEnv + "=" + mode, helperHomeEnv + "=" + home,
		helperRunEnv + "=" + id, helperNEnv + "=" + strconv.Itoa(n)}, cred)
}

func TestMultiProcessUpdatesAndEvents(t *testing.T) {
	const procs, each = 4, 40
	s := openStore(t)
	r := mustCreate(t, s, run.NewID())
	out := runHelpers(t, "race", s.L.Home, r.ID, procs, each, nil)
	if t.Failed() {
		t.FailNow()
	}
	if won := strings.Count(out, "won"); won != 1 || strings.Count(out, "lost") != procs-1 {
		t.Fatalf("racing transitions across processes: %q; want exactly one winner", out)
	}
	got, err := s.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxAttempts != procs*each || got.Version != 2+procs*each {
		t.Fatalf("counter %d version %d: want %d and %d (lost updates across processes)",
			got.MaxAttempts, got.Version, procs*each, 2+procs*each)
	}
	evs, err := s.Events(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1+procs*each {
		t.Fatalf("%d events, want %d", len(evs), 1+procs*each)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has Seq %d: want 1..n in file order", i, e.Seq)
		}
	}
	// This process's view of the journal stays right after the others wrote.
	e, err := s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "parent", nil))
	if err != nil || e.Seq != int64(len(evs)+1) {
		t.Fatalf("parent append: Seq %d, %v; want %d", e.Seq, err, len(evs)+1)
	}
}
