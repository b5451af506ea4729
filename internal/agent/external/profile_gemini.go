package external

import (
	"strings"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// geminiDefaultModel is the model asked for without --model: the CLI's own
// default Pro model (without --model it would route every turn through a
// flash-lite classifier request first).
const geminiDefaultModel = "gemini-2.5-pro"

// geminiSettings are the CLI's user settings (~/.gemini/settings.json; not
// its system settings, GEMINI_CLI_SYSTEM_SETTINGS_PATH, which it skips
// under a world-writable directory such as /tmp):
//   - security.auth.selectedType: the Gemini API with GEMINI_API_KEY. Left
//     unset, GOOGLE_GEMINI_BASE_URL selects the "gateway" auth type, which
//     this version's non-interactive mode rejects ("Invalid auth method
//     selected.", exit 41).
//   - security.folderTrust: off (GEMINI_CLI_TRUST_WORKSPACE=true also
//     trusts the workspace); headless mode exits on an untrusted folder.
//   - privacy.usageStatisticsEnabled: off, else it posts Clearcut logs to
//     play.googleapis.com and sends x-gemini-api-privileged-user-id.
//   - telemetry (OpenTelemetry), auto-update and its npm registry check,
//     IDE integration: off.
//   - ui.showCompatibilityWarnings: no TERM=dumb warnings on stderr.
const geminiSettings = `{
  "security": {
    "auth": {"selectedType": "gemini-api-key"},
    "folderTrust": {"enabled": false}
  },
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false, "logPrompts": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "ide": {"enabled": false},
  "ui": {"showCompatibilityWarnings": false}
}
`

// geminiSettingsFile is where geminiSettings go, relative to HOME.
const geminiSettingsFile = ".gemini/settings.json"

// geminiProfile runs Gemini CLI headless (--prompt) against the gateway's
// Gemini route.
var geminiProfile = Profile{Info: agent.Info{
	Name:       "gemini",
	Binary:     "gemini",
	Install:    "npm install -g @google/gemini-cli",
	Protocol:   "gemini",
	BaseURLEnv: "GOOGLE_GEMINI_BASE_URL",
	BaseURLKeys: []run.KeySource{{Env: "GEMINI_API_KEY", Header: "x-goog-api-key"},
		{Env: "GOOGLE_API_KEY", Header: "x-goog-api-key"}},
	ModelEnv:     "GEMINI_MODEL",
	DefaultModel: geminiDefaultModel,
	Tested:       "0.61.0",
	// Clearcut usage logs (off with privacy.usageStatisticsEnabled).
	Telemetry: []string{"play.googleapis.com"},
	Sessions:  true,
	Doc:       "Gemini CLI, headless (Gemini API)",
}, Launch: geminiLaunch,
}

func geminiLaunch(in LaunchInput) Launch {
	model := in.Model
	if model == "" {
		model = geminiDefaultModel
	}
	cmd := []string{shellQuote(in.Binary), "--approval-mode", "yolo", "--output-format", "text",
		"--model", shellQuote(model)}
	switch {
	case in.Resume && in.Session != "":
		cmd = append(cmd, "--resume", shellQuote(in.Session))
	case in.Resume:
		cmd = append(cmd, "--resume", "latest")
	case in.Session != "":
		cmd = append(cmd, "--session-id", shellQuote(in.Session))
	}
	// --prompt= keeps a task that starts with "-" from being parsed as
	// flags; the prompt (not piped stdin, which the CLI gives up on after
	// 500 ms without data) makes the run headless.
	cmd = append(cmd, `--prompt="$(cat)"`)
	return Launch{
		Command: strings.Join(cmd, " "),
		Env: []string{
			// The SDK appends /v1beta/models/M:streamGenerateContent.
			"GOOGLE_GEMINI_BASE_URL=" + in.BaseURL,
			// Sent as x-goog-api-key.
			"GEMINI_API_KEY=" + in.Key,
			"GEMINI_CLI_TRUST_WORKSPACE=true",
			// No second node process (it only re-executes itself with a
			// larger heap limit).
			"GEMINI_CLI_NO_RELAUNCH=true",
			"GEMINI_TELEMETRY_ENABLED=false",
		},
		Files: map[string]string{geminiSettingsFile: geminiSettings},
	}
}
