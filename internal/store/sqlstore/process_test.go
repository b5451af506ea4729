package sqlstore_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The helper process: when the test binary is re-executed with
// AGENTRUN_SQLSTORE_HELPER set, TestHelperProcess acts as one of several
// processes sharing a database, and the test itself does nothing.
const (
	helperEnv    = "AGENTRUN_SQLSTORE_HELPER"
	helperURLEnv = "AGENTRUN_SQLSTORE_HELPER_URL"
	helperRunEnv = "AGENTRUN_SQLSTORE_HELPER_RUN"
	helperNEnv   = "AGENTRUN_SQLSTORE_HELPER_N"
)

func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	if err := helper(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helper races one transition against the other processes, then
// interleaves n updates and n appends.
func helper() error {
	id := os.Getenv(helperRunEnv)
	n, _ := strconv.Atoi(os.Getenv(helperNEnv))
	s, err := sqlstore.Open(ctx, os.Getenv(helperURLEnv))
	if err != nil {
		return err
	}
	defer s.Close()
	testsupport.AwaitGate() // start together
	_, err = s.Transition(ctx, id, []run.State{run.StateQueued}, run.StatePreparing, "", strconv.Itoa(os.Getpid()))
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
}

// TestMultiProcess: processes sharing one database (a SQLite file, a
// PostgreSQL server) see one winner of a racing transition, lose no
// update and number the journal 1..n.
func TestMultiProcess(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		const procs, each = 4, 40
		url := newURL(t)
		s := openStore(t, url)
		r := mustCreate(t, s, run.NewID())
		r0, err := s.Update(ctx, r.ID, func(r *run.Run) error { r.MaxAttempts = 0; return nil })
		if err != nil {
			t.Fatal(err)
		}
		out := runHelpers(t, url, r.ID, procs, each)
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
		if got.MaxAttempts != procs*each || got.Version != r0.Version+1+procs*each {
			t.Fatalf("counter %d version %d: want %d and %d (lost updates across processes)",
				got.MaxAttempts, got.Version, procs*each, r0.Version+1+procs*each)
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
				t.Fatalf("event %d has Seq %d: want 1..n", i, e.Seq)
			}
		}
	})
}

// runHelpers runs procs helper processes, started together, and returns
// their combined stdout once all have exited.
func runHelpers(t *testing.T, url, id string, procs, n int) string {
	t.Helper()
	return testsupport.RunHelpers(t, "TestHelperProcess", procs, []string{helperEnv + "=1", helperURLEnv + "=" + url,
		helperRunEnv + "=" + id, helperNEnv + "=" + strconv.Itoa(n)}, nil)
}
