package external

import (
	"encoding/json"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// qwenSettings is ~/.qwen/settings.json: OpenAI-compatible auth, no
// telemetry, usage statistics, auto-update, feedback or folder-trust
// prompt.
func qwenSettings(model string) string {
	s := map[string]any{
		"$version": 3,
		"security": map[string]any{
			"auth":        map[string]any{"selectedType": "openai"},
			"folderTrust": map[string]any{"enabled": false},
		},
		"model":     map[string]any{"name": model},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false, "logPrompts": false},
		"general":   map[string]any{"enableAutoUpdate": false},
		"ui":        map[string]any{"enableUserFeedback": false, "hideBanner": true},
		"ide":       map[string]any{"enabled": false},
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b) + "\n"
}

// qwenProfile runs Qwen Code (a Gemini CLI fork) headless against the
// gateway's OpenAI chat completions route.
var qwenProfile = Profile{Info: agent.Info{
	Name:     "qwen",
	Binary:   "qwen",
	Install:  "npm install -g @qwen-code/qwen-code",
	Protocol: "openai",
	// Qwen Code's own OpenAI-compatible settings: any provider's
	// endpoint, its key in OPENAI_API_KEY.
	BaseURLEnv: "OPENAI_BASE_URL",
	BaseURLKeys: []run.KeySource{{Env: "OPENAI_API_KEY", Header: "authorization"},
		{Env: "DASHSCOPE_API_KEY", Header: "authorization"}},
	ModelEnv:     "OPENAI_MODEL",
	DefaultModel: "qwen3-coder-plus",
	// Alibaba Cloud Model Studio's OpenAI-compatible API.
	Upstream: "https://dashscope-intl.aliyuncs.com/compatible-mode",
	KeyEnv:   []string{"DASHSCOPE_API_KEY"},
	Tested:   "0.24.4",
	// Usage statistics (Aliyun RUM) and the npm update check; both off.
	Telemetry:  []string{"gb4w8c3ygj-default-sea.rum.aliyuncs.com", "registry.npmjs.org"},
	Sessions:   true,
	SessionIDs: true,
	Doc:        "Qwen Code, headless (OpenAI chat completions)",
}, Launch: func(in LaunchInput) Launch {
	model := in.Model
	if model == "" {
		model = "qwen3-coder-plus"
	}
	cmd := shellQuote(in.Binary) + " --yolo"
	switch {
	case in.Resume && in.Session != "":
		cmd += " --resume " + shellQuote(in.Session)
	case in.Resume:
		cmd += " --continue"
	case in.Session != "":
		cmd += " --session-id " + shellQuote(in.Session)
	}
	return Launch{
		Command: cmd + ` -p "$(cat)"`,
		Env: []string{
			"OPENAI_API_KEY=" + in.Key,
			"OPENAI_BASE_URL=" + in.BaseURL + "/v1",
			"OPENAI_MODEL=" + model,
			"QWEN_USAGE_STATISTICS_ENABLED=false",
			"QWEN_CODE_SUPPRESS_YOLO_WARNING=1",
		},
		Files: map[string]string{".qwen/settings.json": qwenSettings(model)},
	}
},
}
