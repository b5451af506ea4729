package supervisor

import (
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

// Only a run that stopped at its export, its last attempt completed with
// every check passed, and resumed without instructions, is exported again
// without another attempt.
func TestExportOnly(t *testing.T) {
	stopped := func(reason run.Reason, outcome run.Reason, checks ...bool) *run.Run {
		r := &run.Run{Reason: reason, Checks: []run.CheckSpec{{Name: "a"}, {Name: "b"}}}
		a := run.Attempt{N: 1, Outcome: outcome}
		for i, passed := range checks {
			a.Checks = append(a.Checks, run.CheckResult{Name: r.Checks[i].Name, Passed: passed})
		}
		r.Attempts = []run.Attempt{a}
		return r
	}
	for _, c := range []struct {
		what string
		r    *run.Run
		note string
		want bool
	}{
		{"export failed", stopped(run.ReasonExportFailed, run.ReasonCompleted, true, true), "", true},
		{"interrupted after the checks", stopped(run.ReasonInterrupted, run.ReasonCompleted, true, true), "", true},
		{"with instructions", stopped(run.ReasonExportFailed, run.ReasonCompleted, true, true), "also fix b", false},
		{"a check failed", stopped(run.ReasonChecksFailed, run.ReasonCompleted, true, false), "", false},
		{"interrupted during the checks", stopped(run.ReasonInterrupted, run.ReasonCompleted, true), "", false},
		{"interrupted during the attempt", stopped(run.ReasonInterrupted, run.ReasonInterrupted), "", false},
		{"no changes", stopped(run.ReasonNoChanges, run.ReasonCompleted, true, true), "", false},
		{"no attempt", &run.Run{Reason: run.ReasonInterrupted}, "", false},
	} {
		if got := exportOnly(c.r, c.note); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}
