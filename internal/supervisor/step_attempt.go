package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// attemptStep is agent attempt N: the agent works on the task in the
// sandbox until it ends on its own or ctx ends.
//
// Run writes the prompt and the agent's log under the attempt's directory
// (making it, and its checks directory; Prepare starts that ahead),
// journals "attempt N started", runs the agent, and journals how it ended
// (an agent_exit event). It does not move the run's state: the caller recorded the attempt with the
// move to running, and records the result (attemptResult.record) with the
// next state change. The result's Outcome is nil only when the attempt
// could not be set up (the error says why); otherwise it is how the
// agent ended, also when Run returns the agent's error (sandbox_error, or
// cancelled when ctx ended). With a gateway, the attempt's usage is what
// the gateway counted during it.
type attemptStep struct {
	Record  *run.Run
	Layout  layout.Layout
	Agent   agent.Agent
	Sandbox sandbox.Sandbox
	// Gateway meters the attempt (nil or not running: the agent's own
	// count stands).
	Gateway *gatewayStep
	N       int
	Prompt  string
	// Resumed: the attempt continues the work of an attempt that a
	// previous supervisor ran (resume).
	Resumed bool
	// Env is KEY=VALUE for the variables the run passes to the agent.
	Env   []string
	Event func(run.Event)

	files chan attemptFiles // Prepare's (nil: Run makes them)
}

// attemptFiles are the agent's log, opened, once the attempt's directory
// and prompt are written, or why they could not be.
type attemptFiles struct {
	log *os.File
	err error
}

// Prepare writes the attempt's directory, prompt and log in the
// background, while the caller records the move to running (a commit,
// or a round trip to a team server): Run takes them. A prepared step
// that is never run is Abandoned. An attempt that never started (a
// cancel won the move) leaves them behind, empty of output: the next
// attempt of that number (a resume) writes over them.
func (a *attemptStep) Prepare() {
	ch := make(chan attemptFiles, 1)
	a.files = ch
	go func() {
		f, err := a.makeFiles()
		ch <- attemptFiles{f, err}
	}()
}

// Abandon lets go of what Prepare made for a step that will not run.
func (a *attemptStep) Abandon() {
	if a.files == nil {
		return
	}
	if f := <-a.files; f.log != nil {
		f.log.Close()
	}
	a.files = nil
}

// makeFiles makes the attempt's directory (and its checks directory),
// writes the prompt and opens the agent's log.
func (a *attemptStep) makeFiles() (*os.File, error) {
	r, l, n := a.Record, a.Layout, a.N
	if err := os.MkdirAll(filepath.Join(l.AttemptDir(r.ID, n), "checks"), 0o700); err != nil {
		return nil, fmt.Errorf("attempt dir: %w", err)
	}
	if err := os.WriteFile(l.Prompt(r.ID, n), []byte(a.Prompt), 0o600); err != nil {
		return nil, fmt.Errorf("write prompt: %w", err)
	}
	logf, err := os.OpenFile(l.AgentLog(r.ID, n), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	return logf, nil
}

// attemptResult is how attempt N ended.
type attemptResult struct {
	N        int
	Outcome  *agent.Outcome
	Finished time.Time
}

// Run runs the attempt; see attemptStep.
func (a *attemptStep) Run(ctx context.Context) (attemptResult, error) {
	r, l, n := a.Record, a.Layout, a.N
	dir := l.AttemptDir(r.ID, n)
	var logf *os.File
	var err error
	if a.files != nil {
		f := <-a.files
		a.files = nil
		logf, err = f.log, f.err
	} else {
		logf, err = a.makeFiles()
	}
	if err != nil {
		return attemptResult{}, err
	}
	defer logf.Close()
	// The attempt itself was recorded with the move to running.
	ev := run.NewEvent(run.EventAttempt, fmt.Sprintf("attempt %d started", n), nil)
	ev.Attempt = n
	a.Event(ev)

	sb := a.Sandbox
	start, missing := startDir(ctx, sb, r.Subdir)
	if missing {
		ev := run.NewEvent(run.EventWarning, fmt.Sprintf("%s, where the task was given, is not a directory in the workspace: the agent starts at its top", r.Subdir), map[string]any{"subdir": r.Subdir})
		ev.Attempt = n
		a.Event(ev)
	}
	before := a.Gateway.usage()
	out, err := a.Agent.Attempt(ctx, agent.AttemptInput{
		Run: r, N: n, Prompt: a.Prompt, Resumed: a.Resumed,
		Runner: sb.Runner(), WorkDir: sb.WorkDir(), StartDir: start, Env: a.Env,
		Dir: dir, RunDir: l.RunDir(r.ID), Output: logf,
		Gateway: a.Gateway.access(sb.GatewayAddr()), Home: sb.HomeDir(), HostHome: l.SandboxHome(r.ID),
		ContinueSession: continueSession(r, len(r.Attempts)+1, n),
		HomeTemplates:   l.AgentHomes(),
		Event: func(e run.Event) {
			if e.Attempt == 0 {
				e.Attempt = n
			}
			a.Event(e)
		},
	})
	if err == nil && out == nil {
		err = errors.New("agent returned no outcome")
	}
	if err != nil {
		out = &agent.Outcome{Reason: run.ReasonSandboxError, Message: err.Error()}
		if ctx.Err() != nil {
			out.Reason = run.ReasonCancelled
		}
	}
	finished := time.Now().UTC()
	if a.Gateway.running() {
		meter(out, before, a.Gateway.usage())
	}
	ev = run.NewEvent(run.EventAgentExit, fmt.Sprintf("attempt %d: %s", n, describeOutcome(out)), map[string]any{"exit_code": out.ExitCode, "outcome": out.Reason})
	ev.Attempt = n
	a.Event(ev)
	return attemptResult{N: n, Outcome: out, Finished: finished}, err
}

// meter sets out's usage to what the gateway counted between before and
// after: every model request went through the gateway, so its count is
// the attempt's usage (an agent's own count would be a second one). The
// agent's count of turns stays.
func meter(out *agent.Outcome, before, after *run.Usage) {
	turns := 0
	if out.Usage != nil {
		turns = out.Usage.Turns
	}
	out.Usage = after.Minus(before)
	if out.Usage == nil && turns > 0 {
		out.Usage = &run.Usage{}
	}
	if out.Usage != nil {
		out.Usage.Turns = turns
	}
}

// record writes how the attempt ended into the run record (the attempt
// and the run's usage); it is queued with later so that it rides on the
// next state change.
func (res attemptResult) record(r *run.Run) {
	out := res.Outcome
	if out == nil {
		return
	}
	for i := range r.Attempts {
		if r.Attempts[i].N == res.N {
			at := &r.Attempts[i]
			finished := res.Finished
			at.FinishedAt, at.ExitCode, at.Outcome, at.Message = &finished, out.ExitCode, out.Reason, out.Message
			at.Session, at.SessionContinued = out.Session, out.SessionContinued
			at.Usage = out.Usage.Clone()
		}
	}
	if out.Usage != nil {
		if r.Usage == nil {
			r.Usage = &run.Usage{}
		}
		r.Usage.Add(*out.Usage)
	}
}

// continueSession reports whether attempt n of r follows an earlier one
// (of this supervisor or a previous one), whose agent CLI session the new
// attempt continues. first is this supervisor's first attempt number.
func continueSession(r *run.Run, first, n int) bool {
	return len(r.Attempts) > 0 || n > first
}
