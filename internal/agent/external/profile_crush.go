package external

import (
	"encoding/json"
	"github.com/agentrun/agentrun/internal/agent"
)

// crushProvider is the provider id crush's config declares for the gateway.
const crushProvider = "agentrun"

// crushConfig is ~/.config/crush/crush.json: one "openai-compat" provider at
// the gateway holding the model (large and small), no metrics, no
// provider-catalog update (catwalk.charm.sh), every tool allowed.
func crushConfig(in LaunchInput, model string) string {
	c := map[string]any{
		"$schema": "https://charm.land/crush.json",
		"providers": map[string]any{
			crushProvider: map[string]any{
				"name":     "agentrun gateway",
				"type":     "openai-compat",
				"base_url": in.BaseURL + "/v1",
				"api_key":  in.Key,
				"models": []any{map[string]any{
					"id": model, "name": model,
					"context_window": 128000, "default_max_tokens": 16000,
				}},
			},
		},
		"models": map[string]any{
			"large": map[string]any{"model": model, "provider": crushProvider},
			"small": map[string]any{"model": model, "provider": crushProvider},
		},
		"permissions": map[string]any{"allowed_tools": []string{
			"bash", "download", "edit", "multiedit", "fetch", "glob", "grep", "ls", "sourcegraph", "view", "write", "agent", "todos",
		}},
		"options": map[string]any{
			"disable_metrics":              true,
			"disable_provider_auto_update": true,
			"disable_default_providers":    true,
		},
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	return string(b) + "\n"
}

// crushProfile runs Charm's crush headless against the gateway's OpenAI
// chat completions route.
//
// Tested by hand with crush v0.90.0 built from its source (go build, its
// github.com/charmbracelet/x/exp/slice taken one pseudo-version newer, the
// one the Go module proxy serves): the end-to-end profile test (the
// native sandbox, --network none, the scripted chat completions server,
// no key in the sandbox) and a second attempt continuing the first one's
// session. CI cannot install crush: the Go module proxy refuses the
// module, and the npm package (from 0.92.0) downloads its binary from
// GitHub when it installs.
var crushProfile = Profile{Info: agent.Info{
	Name:         "crush",
	Binary:       "crush",
	Install:      "npm install -g @charmland/crush",
	Protocol:     "openai",
	DefaultModel: "gpt-4.1",
	Tested:       "0.90.0",
	TestedFrom:   "built from source",
	Telemetry:    []string{"data.charm.land", "catwalk.charm.sh"},
	Sessions:     true,
	Doc:          "Charm Crush, crush run (OpenAI chat completions)",
}, Launch: func(in LaunchInput) Launch {
	model := in.Model
	if model == "" {
		model = "gpt-4.1"
	}
	// --data-dir keeps crush's sessions and logs out of the workspace
	// (its default is <cwd>/.crush). crush run approves every tool call
	// of its session itself (its --yolo is the interactive root
	// command's, which run refuses).
	cmd := shellQuote(in.Binary) + " run --quiet --data-dir " + shellQuote(in.Home+"/.local/share/crush/data") +
		" -m " + shellQuote(crushProvider+"/"+model)
	if in.Resume {
		// crush picks its own session ids; the latest session in
		// the data dir is this run's.
		cmd += " --continue"
	}
	return Launch{
		Command: cmd + ` "$(cat)"`,
		Env: []string{
			"CRUSH_DISABLE_METRICS=1",
			"DO_NOT_TRACK=1",
			"CRUSH_DISABLE_PROVIDER_AUTO_UPDATE=1",
		},
		Files: map[string]string{".config/crush/crush.json": crushConfig(in, model)},
	}
},
}
