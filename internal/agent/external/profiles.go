package external

import (
	"slices"
	"sort"
)

// Profile describes one external agent CLI: data, plus Launch, which says
// how to start it against the model gateway.
type Profile struct {
	Name string
	// Binary is the executable looked up on the submitting user's PATH.
	Binary string
	// Package is where the CLI comes from (for the missing-CLI message),
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
	// DefaultModel is asked for when --model is not given.
	DefaultModel string
	// Tested names the CLI version(s) this profile was tested with.
	Tested string
	// Hosts are what the CLI needs besides the model API (which goes
	// through the gateway), allowed under --network allowlist.
	Hosts []string
	// Telemetry are hosts the CLI calls that a run never needs: never
	// allowed by default, never suggested by `agentrun egress`.
	Telemetry []string
	// Sessions: a later attempt and a resumed run continue the CLI's own
	// session.
	Sessions bool
	// SessionIDs: the CLI starts a session with an id agentrun chooses
	// (LaunchInput.Session); otherwise it continues its latest one.
	SessionIDs bool
	// Doc is one line for --help.
	Doc string
	// Launch builds the command, environment and HOME files of one attempt.
	Launch func(LaunchInput) Launch
}

// profiles is the table of built-in agent profiles, one file each.
var profiles = []Profile{claudeProfile, codexProfile, geminiProfile, qwenProfile, crushProfile, opencodeProfile}

// CommandName is the AgentSpec.Name of an agent given with --agent-cmd.
const CommandName = "command"

// Lookup returns the profile called name.
func Lookup(name string) (Profile, bool) {
	for _, p := range profiles {
		if p.Name == name {
			p.Hosts, p.Telemetry = slices.Clone(p.Hosts), slices.Clone(p.Telemetry)
			return p, true
		}
	}
	return Profile{}, false
}

// Names lists the profile names, sorted.
func Names() []string {
	var n []string
	for _, p := range profiles {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}

// Profiles returns a copy of the table (for help text).
func Profiles() []Profile {
	out := make([]Profile, 0, len(profiles))
	for _, p := range profiles {
		q, _ := Lookup(p.Name)
		out = append(out, q)
	}
	return out
}
