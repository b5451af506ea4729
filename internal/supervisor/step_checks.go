package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// checksStep runs the run's verify checks in the sandbox after attempt N,
// one after the other, each in the workspace.
//
// Run writes each check's output to its log under the attempt's checks
// directory and journals a check event for each with its result. A check
// that fails, times out or cannot be started is a result, not an error;
// a check stopped because ctx ended is recorded as failed (exit code -1),
// and as timed out when the run's time limit ended it. The error is for
// the sandbox or the log failing; the results so far come with it. Run
// does not move the run's state: the caller records the result
// (checksResult.record) with the next state change.
type checksStep struct {
	// Record (the run record) gives the checks.
	Record  *run.Run
	Layout  layout.Layout
	Sandbox sandbox.Sandbox
	N       int
	Event   func(run.Event)
}

// checksResult is what the checks after attempt N found, in the order of
// the run's checks.
type checksResult struct {
	N       int
	Results []run.CheckResult
}

// Run runs the checks; see checksStep.
func (c *checksStep) Run(ctx context.Context) (checksResult, error) {
	res := checksResult{N: c.N}
	if len(c.Record.Checks) == 0 {
		return res, nil
	}
	if err := os.MkdirAll(filepath.Join(c.Layout.AttemptDir(c.Record.ID, c.N), "checks"), 0o700); err != nil {
		return res, fmt.Errorf("check log: %w", err)
	}
	cwd, _ := startDir(ctx, c.Sandbox, c.Record.Subdir)
	for _, spec := range c.Record.Checks {
		cr, err := c.check(ctx, spec, cwd)
		if err != nil {
			return res, err
		}
		res.Results = append(res.Results, cr)
		ev := run.NewEvent(run.EventCheck, fmt.Sprintf("check %s: %s", spec.Name, passFail(cr.Passed)),
			map[string]any{"name": spec.Name, "exit_code": cr.ExitCode, "passed": cr.Passed, "duration": cr.Duration, "log": cr.Log})
		ev.Attempt = c.N
		c.Event(ev)
	}
	return res, nil
}

// check runs one check in cwd.
func (c *checksStep) check(ctx context.Context, spec run.CheckSpec, cwd string) (run.CheckResult, error) {
	n, sb := c.N, c.Sandbox
	res := run.CheckResult{Name: spec.Name, Log: layout.CheckLogRel(n, spec.Name)}
	logf, err := os.OpenFile(c.Layout.CheckLog(c.Record.ID, n, spec.Name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return res, fmt.Errorf("check log: %w", err)
	}
	defer logf.Close()
	start := time.Now()
	er, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: spec.Command, Cwd: cwd}, logf, logf)
	res.Duration = run.Duration(time.Since(start))
	switch {
	case ctx.Err() != nil:
		// Killed: by the run's time limit (a timeout, as the check's own
		// would be) or by a cancel.
		res.ExitCode = -1
		res.TimedOut = errors.Is(context.Cause(ctx), errRunTimeout)
		if res.TimedOut {
			fmt.Fprintf(logf, "agentrun: the check was stopped: %v\n", errRunTimeout)
		}
		return res, nil
	case runner.IsCode(err, runner.CodeExec):
		res.ExitCode = 127
		fmt.Fprintf(logf, "agentrun: the check could not be started: %v\n", err)
		return res, nil
	case err != nil:
		return res, fmt.Errorf("check %s: %w", spec.Name, err)
	}
	res.ExitCode, res.TimedOut = er.ExitCode, er.TimedOut
	res.Passed = er.ExitCode == 0 && !er.TimedOut
	return res, nil
}

// record writes the results into attempt N of the run record; it is
// queued with later so that it rides on the next state change.
func (res checksResult) record(r *run.Run) {
	for i := range r.Attempts {
		if r.Attempts[i].N == res.N {
			r.Attempts[i].Checks = res.Results
		}
	}
}

func passFail(ok bool) string {
	if ok {
		return "passed"
	}
	return "failed"
}
