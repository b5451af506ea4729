package supervisor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// checksIn is a checks step after attempt 2 in a host sandbox on a fresh
// workspace (no attempt ran: the step makes its own log directory).
func checksIn(t *testing.T, checks ...run.CheckSpec) (*checksStep, *sandboxStep, *journal) {
	t.Helper()
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	r.Checks = checks
	startWorkspace(t, r, l)
	sb := startSandbox(t, r, l)
	j := &journal{}
	return &checksStep{Record: r, Layout: l, Sandbox: sb.Sandbox(), N: 2, Event: j.add}, sb, j
}

// TestChecksStep: each check runs in the workspace, its output in its
// log; a failing check is a result; each is journaled; the result records
// the checks with their attempt.
func TestChecksStep(t *testing.T) {
	c, _, j := checksIn(t, run.CheckSpec{Name: "has-a", Command: "test -f a.txt"}, run.CheckSpec{Name: "bad", Command: "echo broken; exit 2"})
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 2 || res.N != 2 {
		t.Fatalf("results %+v", res)
	}
	ok, bad := res.Results[0], res.Results[1]
	if !ok.Passed || ok.ExitCode != 0 || ok.Log != layout.CheckLogRel(2, "has-a") || bad.Passed || bad.ExitCode != 2 || bad.TimedOut {
		t.Fatalf("results %+v", res.Results)
	}
	if b, err := os.ReadFile(c.Layout.CheckLog(c.Record.ID, 2, "bad")); err != nil || string(b) != "broken\n" {
		t.Fatalf("log of bad: %q %v", b, err)
	}
	evs := j.of(run.EventCheck)
	if len(evs) != 2 || evs[0].Message != "check has-a: passed" || evs[1].Message != "check bad: failed" || evs[1].Attempt != 2 {
		t.Fatalf("events %+v", j.evs)
	}
	d := data(t, evs[1])
	hasKeys(t, d, "duration")
	if d["name"] != "bad" || d["exit_code"] != float64(2) || d["passed"] != false || d["log"] != bad.Log {
		t.Fatalf("check event data %v", d)
	}
	rec := &run.Run{Attempts: []run.Attempt{{N: 1}, {N: 2}}}
	res.record(rec)
	if len(rec.Attempts[0].Checks) != 0 || len(rec.Attempts[1].Checks) != 2 {
		t.Fatalf("recorded %+v", rec.Attempts)
	}
}

// TestChecksStepStopped: a check still running when the run's time limit
// ends ctx is failed and timed out, and its log says why; one stopped by
// a cancel is failed, not timed out.
func TestChecksStepStopped(t *testing.T) {
	for _, timeout := range []bool{true, false} {
		c, _, _ := checksIn(t, run.CheckSpec{Name: "slow", Command: "sleep 30"})
		ctx, cancel := context.WithCancelCause(context.Background())
		cause := errRunTimeout
		if !timeout {
			cause = errCancelRequested
		}
		time.AfterFunc(300*time.Millisecond, func() { cancel(cause) })
		res, err := c.Run(ctx)
		cancel(nil)
		if err != nil || len(res.Results) != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		got := res.Results[0]
		if got.Passed || got.ExitCode != -1 || got.TimedOut != timeout {
			t.Fatalf("timeout %v: %+v", timeout, got)
		}
		b, _ := os.ReadFile(c.Layout.CheckLog(c.Record.ID, 2, "slow"))
		if said := strings.Contains(string(b), "the check was stopped: "+errRunTimeout.Error()); said != timeout {
			t.Fatalf("timeout %v: log %q", timeout, b)
		}
	}
}

// TestChecksStepSandboxGone: a sandbox that no longer runs is an error,
// not a failed check, and nothing is journaled.
func TestChecksStepSandboxGone(t *testing.T) {
	c, sb, j := checksIn(t, run.CheckSpec{Name: "x", Command: "true"})
	sb.Stop(context.Background())
	res, err := c.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "check x") || len(res.Results) != 0 || len(j.of(run.EventCheck)) != 0 {
		t.Fatalf("%+v %v, events %+v", res, err, j.evs)
	}
}
