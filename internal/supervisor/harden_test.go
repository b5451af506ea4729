package supervisor

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// TestCheckKilledByRunTimeout: a check still running when the run's time
// limit is reached is recorded as timed out (and failed), and the run
// ends failed with reason timeout.
func TestCheckKilledByRunTimeout(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", []run.CheckSpec{{Name: "slow", Command: "sleep 30"}})
	ctx := context.Background()
	if _, err := st.Update(ctx, s.ID, func(r *run.Run) error { r.Timeout = run.Duration(time.Second); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := st.Get(ctx, s.ID)
	if r.State != run.StateFailed || r.Reason != run.ReasonTimeout {
		t.Fatalf("run %s/%s: %s", r.State, r.Reason, r.Message)
	}
	if len(r.Attempts) != 1 || len(r.Attempts[0].Checks) != 1 {
		t.Fatalf("attempts %+v", r.Attempts)
	}
	c := r.Attempts[0].Checks[0]
	if !c.TimedOut || c.Passed {
		t.Fatalf("check killed by the run's timeout recorded as %+v, want timed_out", c)
	}
}

// TestCancelDuringExportNeverLeavesAnUnrecordedBranch: cancels land at
// random points while runs export (the cancel request recorded and the
// supervisor's context ended, as the CLI's SIGTERM does). Whatever wins,
// the branch agentrun/<id> is either absent or exactly the commit the run
// recorded, a run that recorded a commit succeeded, and no temporary ref
// is left. The runs share one finished run's workspace: only the export
// is repeated.
func TestCancelDuringExportNeverLeavesAnUnrecordedBranch(t *testing.T) {
	s0, st := inProcess(t, "for i in $(seq 1 40); do seq 1 $((i*20)) > f$i.txt; done", nil)
	bg := context.Background()
	if err := s0.Run(bg); err != nil {
		t.Fatal(err)
	}
	r0, _ := st.Get(bg, s0.ID)
	if r0.State != run.StateSucceeded {
		t.Fatalf("first run %s: %s", r0.State, r0.Message)
	}
	ws, err := s0.Workspaces.Open(bg, s0.Layout.Workspace(r0.ID), s0.Layout.WorkspaceState(r0.ID))
	if err != nil {
		t.Fatal(err)
	}
	// The first export is not cancelled: it measures how long one takes,
	// and the cancels land from a third of that to a little past its end.
	const runs = 31
	var won, lost int
	var exportTime time.Duration
	for i := range runs {
		r := *r0
		r.ID = run.NewID()
		r.Branch, r.State, r.Reason, r.Commit, r.Patch, r.Result, r.Supervisor = run.BranchName(r.ID), run.StateRunning, "", "", "", nil, nil
		if err := st.Create(bg, &r); err != nil {
			t.Fatal(err)
		}
		s := &Supervisor{Deps: s0.Deps, ID: r.ID, MaxParallel: 1}
		s.Export = workspace.Export
		ctx, stop := context.WithCancelCause(bg)
		delay := time.Hour
		if i > 0 {
			delay = exportTime/3 + time.Duration(rand.Int64N(int64(exportTime)))
		}
		t0 := time.Now()
		timer := time.AfterFunc(delay, func() {
			_, _ = st.Update(bg, r.ID, func(r *run.Run) error { r.CancelRequested = true; return nil })
			stop(errStopSignal)
		})
		err := s.export(ctx, &prepared{run: &r, ws: ws}, []run.State{run.StateChecking, run.StateRunning})
		timer.Stop()
		stop(nil)
		if i == 0 {
			exportTime = time.Since(t0)
		}
		got, gerr := st.Get(bg, r.ID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		out, _ := testsupport.GitCmd(t, r.Repo, "for-each-ref", "--format=%(objectname)", "refs/heads/"+r.Branch).Output()
		tip := strings.TrimSpace(string(out))
		switch {
		case tip != got.Commit:
			t.Fatalf("run %d (cancel after %v of ~%v): %s/%s, branch at %q but the run recorded commit %q (err %v)",
				i, delay, exportTime, got.State, got.Reason, tip, got.Commit, err)
		case got.Commit != "" && got.State != run.StateSucceeded:
			t.Fatalf("run %d: recorded commit %s but ended %s", i, got.Commit, got.State)
		case got.State == run.StateSucceeded:
			won++
		case got.State == run.StateCancelled:
			lost++
		default:
			t.Fatalf("run %d: ended %s/%s: %s", i, got.State, got.Reason, got.Message)
		}
		if tmp, _ := testsupport.GitCmd(t, r.Repo, "for-each-ref", "refs/agentrun-tmp/").Output(); len(tmp) > 0 {
			t.Fatalf("run %d: temporary refs left: %s", i, tmp)
		}
	}
	t.Logf("export took %v; %d exports won, %d were cancelled", exportTime, won, lost)
}
