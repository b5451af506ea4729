package external

import (
	"github.com/agentrun/agentrun/internal/agent"
	"strconv"
	"strings"
)

// codexKeyEnv is the variable codex reads the gateway's placeholder key
// from (model_providers.agentrun.env_key); codex sends it as
// "Authorization: Bearer <key>".
const codexKeyEnv = "OPENAI_API_KEY"

// codexDefaultModel is asked for when no model is given: codex 0.171's own
// default (first in its bundled model catalog).
const codexDefaultModel = "gpt-6.2-sol"

// codexProfile runs OpenAI's codex CLI (a native Rust binary shipped in the
// npm package) with `codex exec`, against the gateway's "openai" route in
// the Responses wire format.
//
// codex ignores OPENAI_BASE_URL for its built-in provider in exec mode, so
// $CODEX_HOME/config.toml defines a provider "agentrun" whose base_url is
// the gateway and whose env_key names the variable holding the
// placeholder key. --dangerously-bypass-approvals-and-sandbox approves
// every tool call and turns codex's own bubblewrap/landlock sandbox off
// (it cannot nest inside ours). Everything that would call an OpenAI host
// besides the model (update checks, analytics, feedback, OTEL, remote
// plugins/apps, web search) is switched off in the same config.
var codexProfile = Profile{Info: agent.Info{
	Name:         "codex",
	Binary:       "codex",
	Install:      "npm install -g @openai/codex",
	Protocol:     "openai",
	DefaultModel: codexDefaultModel,
	Tested:       "0.171.0",
	Telemetry: []string{
		"chatgpt.com",         // analytics, plugin/app catalogs (seen with features.plugins on)
		"github.com",          // curated plugin marketplace (seen with features.plugins on)
		"api.github.com",      // same, and the release check of the TUI
		"api.openai.com",      // the built-in provider (unused: model_provider = "agentrun")
		"auth.openai.com",     // ChatGPT login and token refresh (unused with an API key)
		"releases.openai.com", // codex update
	},
	Sessions: true,
	Doc:      "OpenAI Codex CLI, codex exec (OpenAI Responses)",
	Native:   codexNative,
}, Launch: codexLaunch,
	// codex spends about 60 ms of a one-file run on its first run in a
	// CODEX_HOME (its SQLite databases made and migrated, its system
	// skills unpacked). Its tmp holds a process's own links and lock.
	Warm: &WarmHome{Volatile: []string{".codex/tmp", ".codex/shell_snapshots"}},
}

// codexNative is what codex's npm launcher (bin/codex.js, 0.171) runs:
// the Rust binary in the platform package that @openai/codex nests (an
// optional dependency per platform), with CODEX_MANAGED_PACKAGE_ROOT and
// CODEX_MANAGED_BY_NPM set. On Node 22 the launcher execs it; on older
// Node it spawns it and stays as its parent.
var codexNative = &agent.Native{
	Launcher: "bin/codex.js",
	Targets: map[string]agent.NativeTarget{
		"linux/amd64":  {Package: "@openai/codex-linux-x64", Target: "x86_64-unknown-linux-musl"},
		"linux/arm64":  {Package: "@openai/codex-linux-arm64", Target: "aarch64-unknown-linux-musl"},
		"darwin/amd64": {Package: "@openai/codex-darwin-x64", Target: "x86_64-apple-darwin"},
		"darwin/arm64": {Package: "@openai/codex-darwin-arm64", Target: "aarch64-apple-darwin"},
	},
	Program:    "bin/codex",
	RootEnv:    "CODEX_MANAGED_PACKAGE_ROOT",
	ManagedEnv: "CODEX_MANAGED_BY_NPM",
}

// codexLaunch builds the codex command line and its config.
func codexLaunch(in LaunchInput) Launch {
	model := in.Model
	if model == "" {
		model = codexDefaultModel
	}
	// Flags both `codex exec` and `codex exec resume` take.
	flags := "--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check -m " + shellQuote(model)
	cmd := shellQuote(in.Binary) + " exec " + flags + " --color never -"
	if in.Resume {
		// codex picks its own session ids (there is no flag to set one), so
		// in.Session is not one of them: continue the newest session in
		// CODEX_HOME, which holds only this run's sessions (--all: whatever
		// the working directory it ran in).
		cmd = shellQuote(in.Binary) + " exec resume " + flags + " --last --all -"
	}
	env := []string{
		codexKeyEnv + "=" + in.Key,
		"CODEX_HOME=" + strings.TrimSuffix(in.Home, "/") + "/.codex",
	}
	return Launch{
		Command: cmd,
		Env:     env,
		Files:   map[string]string{".codex/config.toml": codexConfig(in.BaseURL+"/v1", model)},
	}
}

// codexConfig is $CODEX_HOME/config.toml: the gateway as the model
// provider, and every switch that keeps codex off the network otherwise.
func codexConfig(baseURL, model string) string {
	q := strconv.Quote
	return `# Written by agentrun for one attempt.
model = ` + q(model) + `
model_provider = "agentrun"
approval_policy = "never"
sandbox_mode = "danger-full-access"
# No release check (the TUI's; codex exec makes none either way).
check_for_update_on_startup = false
# No hosted web search tool (it would need the real OpenAI backend).
web_search = "disabled"
hide_agent_reasoning = true
suppress_unstable_features_warning = true

[model_providers.agentrun]
name = "agentrun model gateway"
base_url = ` + q(baseURL) + `
wire_api = "responses"
env_key = ` + q(codexKeyEnv) + `
request_max_retries = 1
stream_max_retries = 1
supports_websockets = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
metrics_exporter = "none"
trace_exporter = "none"

[history]
persistence = "none"

# Commands the model runs never see the key.
[shell_environment_policy]
exclude = [` + q(codexKeyEnv) + `]

[features]
# Shell snapshots ($CODEX_HOME/shell_snapshots/*.sh) capture the whole
# environment, the key included, and outlive a cancelled run.
shell_snapshot = false
# Plugins fetch the curated marketplace from github.com / api.github.com
# and catalogs from chatgpt.com at startup; apps are ChatGPT connectors.
plugins = false
remote_plugin = false
apps = false
tool_suggest = false
image_generation = false
`
}
