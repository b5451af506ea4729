package external

import (
	"encoding/json"
	"github.com/agentrun/agentrun/internal/agent"
	"strings"
)

// opencodeProvider is the provider id opencode's config declares for the
// gateway (models are asked for as opencodeProvider/<model>).
const opencodeProvider = "agentrun"

// opencodeConfig is ~/.config/opencode/opencode.json: one
// OpenAI-compatible provider at the gateway holding the model, every
// permission granted, no auto-update or sharing.
func opencodeConfig(in LaunchInput, model string) string {
	c := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		"permission": "allow",
		"model":      opencodeProvider + "/" + model,
		"provider": map[string]any{
			opencodeProvider: map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "agentrun gateway",
				"options": map[string]any{
					"baseURL": in.BaseURL + "/v1",
					"apiKey":  in.Key,
				},
				"models": map[string]any{model: map[string]any{"name": model}},
			},
		},
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	return string(b) + "\n"
}

// opencodeLock is the package-lock.json that makes opencode's background
// dependency install of its config dir a no-op.
const opencodeLock = `{
  "name": "opencode-config",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "dependencies": {
        "@opencode-ai/plugin": "*"
      }
    }
  }
}
`

// opencodeProfile runs opencode (sst/anomalyco) headless against the
// gateway's OpenAI chat completions route.
var opencodeProfile = Profile{Info: agent.Info{
	Name:         "opencode",
	Binary:       "opencode",
	Install:      "npm install -g opencode-ai",
	Protocol:     "openai",
	DefaultModel: "gpt-4.1",
	Tested:       "1.18.33",
	// models.dev catalog, config-dir plugin install and update checks,
	// release checks, session sharing: all switched off.
	Telemetry: []string{"models.opencode.ai", "registry.npmjs.org", "api.github.com", "opencode.ai", "opncd.ai"},
	Sessions:  true,
	// Its grep and glob tools run rg from PATH, else the copy opencode
	// downloaded into its data directory (from GitHub, which a sandbox
	// does not reach).
	Helpers: []agent.Helper{{Name: "rg", What: "ripgrep, which opencode's grep and glob tools run", DataDir: "opencode/bin",
		Install: "install ripgrep (apt install ripgrep, brew install ripgrep)"}},
	Doc: "opencode run (OpenAI chat completions)",
}, Launch: func(in LaunchInput) Launch {
	model := in.Model
	if model == "" {
		model = "gpt-4.1"
	}
	// --title= names the session after the prompt instead of asking
	// the model for a title (one side request less per run).
	cmd := shellQuote(in.Binary) + " run --title= -m " + shellQuote(opencodeProvider+"/"+model)
	switch {
	case in.Resume && strings.HasPrefix(in.Session, "ses_"):
		// An id opencode gave (it cannot be chosen up front).
		cmd += " --session " + shellQuote(in.Session)
	case in.Resume:
		// The latest session of this directory: HOME holds only this
		// run's sessions.
		cmd += " --continue"
	}
	return Launch{
		Command: cmd + ` "$(cat)"`,
		Env: []string{
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_SHARE=1",
		},
		Files: map[string]string{
			".config/opencode/opencode.json": opencodeConfig(in, model),
			// opencode npm-installs @opencode-ai/plugin into every
			// config dir in the background (registry.npmjs.org) unless
			// node_modules exists and package-lock.json already lists
			// it (Npm.install's dirty check).
			".config/opencode/package-lock.json":               opencodeLock,
			".config/opencode/node_modules/.package-lock.json": opencodeLock,
		},
	}
},
}
