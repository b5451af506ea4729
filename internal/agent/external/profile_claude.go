package external

import (
	"strings"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// claudeDefaultModel is the model asked for without --model.
const claudeDefaultModel = "claude-opus-5-5"

// claudeProfile runs Claude Code (the native build that npm installs) in
// print mode against the gateway's Anthropic route.
var claudeProfile = Profile{Info: agent.Info{
	Name:     "claude",
	Binary:   "claude",
	Install:  "npm install -g @anthropic-ai/claude-code",
	Protocol: "anthropic",
	// An Anthropic-compatible endpoint set for the CLI (another
	// provider's, a company proxy) takes its bearer token first, as the
	// CLI sends it.
	BaseURLEnv: "ANTHROPIC_BASE_URL",
	BaseURLKeys: []run.KeySource{{Env: "ANTHROPIC_AUTH_TOKEN", Header: "authorization"},
		{Env: "ANTHROPIC_API_KEY", Header: "x-api-key"}},
	ModelEnv:     "ANTHROPIC_MODEL",
	DefaultModel: claudeDefaultModel,
	Tested:       "2.1.337",
	// Hosts it calls that a run never needs (none is called with
	// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC): api.anthropic.com
	// directly for event logging (/api/event_logging), metrics, feedback,
	// feature flags and a HEAD /api/hello preconnect (that one to
	// ANTHROPIC_BASE_URL); Datadog logs; downloads.claude.ai for updates
	// and the model catalog; raw.githubusercontent.com for the changelog;
	// storage.googleapis.com for plugin stats.
	Telemetry: []string{
		"api.anthropic.com", "http-intake.logs.us5.datadoghq.com", "downloads.claude.ai",
		"raw.githubusercontent.com", "storage.googleapis.com",
	},
	Sessions:   true,
	SessionIDs: true,
	Doc:        "Claude Code, print mode (Anthropic Messages)",
}, Launch: claudeLaunch,
	// Claude Code's first start in a HOME (its config made and migrated,
	// its built-in plugins registered) costs about 10-17 ms of a one-file
	// run. The warm-up's session transcript and the config's backups are
	// its own.
	Warm: &WarmHome{Volatile: []string{".claude/projects", ".claude/backups"}},
}

func claudeLaunch(in LaunchInput) Launch {
	model := in.Model
	if model == "" {
		model = claudeDefaultModel
	}
	cmd := strings.Join([]string{shellQuote(in.Binary), "-p", "--output-format", "text", "--dangerously-skip-permissions",
		"--model", shellQuote(model)}, " ")
	switch {
	case in.Resume && in.Session != "":
		// --resume fails when the session was never saved (the earlier
		// attempt died first) and --session-id fails when it was: pick by
		// the transcript claude keeps under ~/.claude/projects/<cwd>/.
		id := shellQuote(in.Session)
		cmd = `set -- "$HOME"/.claude/projects/*/` + id + `.jsonl; if [ -e "$1" ]; then exec ` + cmd + " --resume " + id +
			"; else exec " + cmd + " --session-id " + id + "; fi"
	case in.Resume:
		cmd += " --continue"
	case in.Session != "":
		cmd += " --session-id " + shellQuote(in.Session)
	}
	return Launch{
		Command: cmd,
		Env: []string{
			// The SDK appends /v1/messages to the base URL.
			"ANTHROPIC_BASE_URL=" + in.BaseURL,
			"ANTHROPIC_API_KEY=" + in.Key,
			// One model for everything: the main loop, subagents (Explore
			// asks for haiku) and interactive-mode side requests (titles,
			// summaries), which otherwise name a Claude model a local
			// server does not serve.
			"ANTHROPIC_MODEL=" + model,
			"ANTHROPIC_SMALL_FAST_MODEL=" + model,
			"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + model,
			"ANTHROPIC_DEFAULT_SONNET_MODEL=" + model,
			"ANTHROPIC_DEFAULT_OPUS_MODEL=" + model,
			"CLAUDE_CODE_SUBAGENT_MODEL=" + model,
			// --dangerously-skip-permissions refuses to run as root
			// otherwise; the sandbox is the deliberate sandbox it asks for.
			"IS_SANDBOX=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1",
			"DISABLE_ERROR_REPORTING=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_BUG_COMMAND=1",
			"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
			"CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL=1",
		},
	}
}
