// Package agent is the agent seam: how to start an agent for a task and how
// to resume it. External CLI agents are profiles (data) run as a shell
// command inside the sandbox with the prompt on stdin; the built-in tool-use
// loop (agent/loop) runs in the supervisor and acts through the runner.
//
// The supervisor never branches on which agent it has.
package agent

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"

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
	WorkDir string // workspace path inside the sandbox
	// StartDir is where the agent starts, inside WorkDir ("": WorkDir
	// itself): the directory the submit named (run.Run.Subdir).
	StartDir string
	Env      []string // KEY=VALUE the agent receives (profile-named variables only)
	// Dir is a host directory for this attempt's records (transcript, spills).
	Dir string
	// RunDir is the host run directory (state that spans attempts, e.g. a
	// built-in loop's conversation).
	RunDir string
	// Output receives the agent's human-readable output (agent.log).
	Output io.Writer
	// Event journals an event for the run (egress, tool summaries, warnings).
	Event func(run.Event)
	// Gateway is how this attempt reaches the run's model gateway (nil:
	// the run has none).
	Gateway *Gateway
	// Home is HOME as the sandbox sees it; HostHome is the same directory
	// on the host (where a profile's config files are written, without
	// following any link the agent may have left there).
	Home     string
	HostHome string
	// ContinueSession asks a profile that keeps sessions to continue the
	// run's session (a previous attempt ran the agent).
	ContinueSession bool
	// HomeTemplates is a host directory where profiles keep their CLI's
	// warm HOME (external.WarmHome); "" for none.
	HomeTemplates string
}

// Gateway is the model gateway as an attempt reaches it.
type Gateway struct {
	// URL is the gateway's base URL inside the sandbox
	// (http://127.0.0.1:PORT); a route is URL + "/" + route.
	URL string
	// Key is the placeholder key: the run's token, useless elsewhere.
	Key string
	// Routes are the route names the run's gateway serves.
	Routes []string
	// Socket is the gateway's unix socket on the host (for an agent that
	// runs in the supervisor, the built-in loop).
	Socket string
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
	// Final says another attempt cannot fix how this one ended (the model
	// server unreachable, the key refused, the model missing): the run ends
	// instead of spending its remaining attempts.
	Final bool
	// Session is the agent CLI's session the attempt used, and whether it
	// continued it.
	Session          string
	SessionContinued bool
}

// Names of the agents that are not profiles.
const (
	// BuiltinName is the AgentSpec.Name of the built-in tool-use loop.
	BuiltinName = "builtin"
	// CommandName is the AgentSpec.Name of an agent given as a command
	// (--agent-cmd).
	CommandName = "command"
)

// Info describes one external agent CLI profile: data only, for planning
// a run (which binary, which gateway route, which hosts), help, completion
// and doctor. The profile's launch code stays in its implementation.
type Info struct {
	Name string
	// Binary is the executable looked up on the submitting user's PATH.
	Binary string
	// Install is where the CLI comes from (for the missing-CLI message),
	// e.g. "npm install -g @anthropic-ai/claude-code".
	Install string
	// Protocol is the gateway route the CLI's model traffic takes:
	// "anthropic", "openai" (chat completions and Responses) or "gemini".
	Protocol string
	// Upstream and KeyEnv, when set, replace the route's public default:
	// the provider's API the CLI uses without --model-server, and the
	// variables its key is read from (Bearer).
	Upstream string
	KeyEnv   []string
	// BaseURLEnv is the variable the CLI itself reads its API's base URL
	// from (ANTHROPIC_BASE_URL for claude), and BaseURLKeys where its key
	// is then read, in order. Set in the submitting environment, and
	// neither --model-server nor config.toml's [providers.NAME] url naming
	// one, the gateway forwards the CLI's model traffic there, as the CLI
	// would go bare: a key for another provider never goes to the public
	// API.
	BaseURLEnv  string
	BaseURLKeys []run.KeySource
	// ModelEnv is the variable the CLI reads its model from, asked for
	// when --model is not given; DefaultModel when neither is.
	ModelEnv string
	// DefaultModel is asked for when --model is not given.
	DefaultModel string
	// Tested names the CLI version(s) this profile was tested with.
	Tested string
	// TestedFrom, when set, says where the tested version came from
	// when Install does not give it (crush: built from its source).
	TestedFrom string
	// Hosts are what the CLI needs besides the model API (which goes
	// through the gateway), allowed under --network allowlist.
	Hosts []string
	// Telemetry are hosts the CLI calls that a run never needs: never
	// allowed by default, never suggested by `agentrun egress`.
	Telemetry []string
	// Sessions: a later attempt and a resumed run continue the CLI's own
	// session.
	Sessions bool
	// SessionIDs: the CLI starts a session with an id agentrun chooses;
	// otherwise it continues its latest one.
	SessionIDs bool
	// Native, when set, says where the CLI's npm launcher finds the
	// program it runs: a run starts that program directly.
	Native *Native
	// Helpers are programs the CLI runs from PATH for some of its tools:
	// submit shows each where it finds it, or warns that those tools will
	// fail.
	Helpers []Helper
	// Doc is one line for --help.
	Doc string
}

// Helper is a program an agent CLI runs from PATH for some of its tools
// (opencode's grep and glob run ripgrep). Found on the submitting user's
// PATH, or where the CLI keeps its own copy, it is made visible read-only
// inside the sandbox and its directory put first on the agent's PATH
// (run.AgentSpec.Helpers); found nowhere, submit and doctor warn.
type Helper struct {
	// Name is the program's name on PATH ("rg").
	Name string
	// What says what it is and which tools need it, for messages:
	// "ripgrep, which opencode's grep and glob tools run".
	What string
	// DataDir, when set, is where the CLI keeps the copy it downloads for
	// itself, under the user's data home ($XDG_DATA_HOME, else
	// ~/.local/share): "opencode/bin". The sandbox's HOME is the run's
	// own, so the CLI would not find that copy there by itself.
	DataDir string
	// Install says how to install it.
	Install string
}

// TestedWith is the version the profile was tested with, and where it
// came from when Install does not give it ("0.90.0 (built from
// source)"); "" when it is not tested.
func (i Info) TestedWith() string {
	if i.TestedFrom != "" {
		return i.Tested + " (" + i.TestedFrom + ")"
	}
	return i.Tested
}

// Catalog is the agent profiles of this build, in table order (made in
// one place, the wiring).
type Catalog []Info

// Lookup returns the profile called name (a copy).
func (c Catalog) Lookup(name string) (Info, bool) {
	for _, i := range c {
		if i.Name == name {
			i.Hosts, i.Telemetry, i.KeyEnv, i.Helpers = slices.Clone(i.Hosts), slices.Clone(i.Telemetry), slices.Clone(i.KeyEnv), slices.Clone(i.Helpers)
			return i, true
		}
	}
	return Info{}, false
}

// Names lists the profile names, sorted.
func (c Catalog) Names() []string {
	n := make([]string, 0, len(c))
	for _, i := range c {
		n = append(n, i.Name)
	}
	slices.Sort(n)
	return n
}

// NewSessionID is a random (version 4) UUID: an agent CLI's session id.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
