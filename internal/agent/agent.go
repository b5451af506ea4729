// Package agent is the agent seam: how to start an agent for a task and how
// to resume it. External CLI agents are profiles (data) run as a shell
// command inside the sandbox with the prompt on stdin; the built-in tool-use
// loop (agent/loop) runs in the supervisor and acts through the runner.
//
// The supervisor never branches on which agent it has.
package agent

import (
	"context"
	"io"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
)

// Agent runs attempts of one run.
type Agent interface {
	// Attempt runs one agent attempt to its end. A non-nil error means the
	// harness failed (sandbox_error); how the agent itself ended is in the
	// Outcome. ctx cancellation (cancel, timeout) must stop the agent
	// promptly and return an Outcome with Reason cancelled/timeout.
	Attempt(ctx context.Context, in AttemptInput) (*Outcome, error)
}

// AttemptInput is everything an attempt needs.
type AttemptInput struct {
	Run     *run.Run
	N       int    // attempt number, 1-based
	Prompt  string // the task, plus what failed last time for n > 1
	Resumed bool   // the previous attempt was interrupted or the run failed and was resumed
	Runner  runner.Client
	WorkDir string   // workspace path inside the sandbox
	Env     []string // KEY=VALUE the agent receives (profile-named variables only)
	// Dir is a host directory for this attempt's records (transcript, spills).
	Dir string
	// RunDir is the host run directory (state that spans attempts, e.g. a
	// built-in loop's conversation).
	RunDir string
	// Output receives the agent's human-readable output (agent.log).
	Output io.Writer
	// Event journals an event for the run (egress, tool summaries, warnings).
	Event func(run.Event)
}

// Outcome is how an attempt ended.
type Outcome struct {
	// Reason is run.ReasonCompleted when the agent finished normally;
	// otherwise agent_failed, timeout, cancelled, model_error, stalled,
	// stuck, max_turns, context_exhausted.
	Reason   run.Reason
	ExitCode *int
	Message  string
	Usage    *run.Usage
}
