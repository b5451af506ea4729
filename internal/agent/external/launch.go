package external

// LaunchInput is what a profile needs to start its CLI for one attempt.
type LaunchInput struct {
	// Binary is the CLI's absolute path as the sandbox sees it (found on
	// the submitting user's PATH and made visible read-only).
	Binary string
	// BaseURL is the model gateway's URL for the profile's protocol, as
	// reached from inside the sandbox, without a trailing slash, e.g.
	// http://127.0.0.1:3129/anthropic. The gateway forwards
	// BaseURL + "/v1/messages" to the upstream's /v1/messages.
	BaseURL string
	// Key is the placeholder API key the CLI sends to the gateway; it
	// carries the run's gateway token and is useless outside the run.
	Key string
	// Model is the model to ask for (--model); "" means the profile's
	// DefaultModel.
	Model string
	// Home and WorkDir are HOME and the workspace as the sandbox sees them.
	Home    string
	WorkDir string
	// Session is the agent's own session id to start (a new attempt) or
	// continue (Resume); "" when the profile keeps no session.
	Session string
	// Resume asks the CLI to continue Session (or its latest session)
	// instead of starting a new one.
	Resume bool
}

// Launch is how a profile starts its CLI for one attempt.
type Launch struct {
	// Command is run with sh -c inside the sandbox, the prompt on stdin.
	// It must quote Binary (shellQuote) and may pass the prompt as one
	// argument only as "$(cat)".
	Command string
	// Env is KEY=VALUE added to the sandbox's base environment for the
	// agent (not the checks): gateway URLs, the placeholder key, telemetry
	// and update switches.
	Env []string
	// Files are written under HOME before the attempt (path relative to
	// HOME, slash-separated, no ".."), mode 0600: config files, settings,
	// trust flags. Never into the workspace.
	Files map[string]string
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, `'\''`...)
			continue
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}
