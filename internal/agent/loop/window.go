package loop

import (
	"context"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
)

// EnvContextWindow overrides the context window (after the flag).
const EnvContextWindow = "AGENTRUN_CONTEXT_WINDOW"

// DefaultContextWindow is assumed, with a warning, when nothing says.
const DefaultContextWindow = 32768

// knownWindows is the built-in table, matched by substring of the lowered
// model name; the first match wins, so specific names come first.
var knownWindows = []struct {
	match  string
	tokens int
}{
	{"qwen3-coder", 262144},
	{"qwen3", 131072},
	{"qwen2.5-coder", 32768},
	{"devstral", 131072},
	{"gpt-oss", 131072},
	{"gpt-4.1", 1047576},
	{"gpt-4o", 128000},
	{"gpt-5", 400000},
	{"o3", 200000},
	{"o4-mini", 200000},
	{"claude", 200000},
	{"deepseek", 131072},
	{"glm-4", 131072},
	{"kimi-k2", 131072},
	{"llama-3.1", 131072},
	{"llama3.1", 131072},
	{"llama-3.3", 131072},
	{"llama3.3", 131072},
	{"mistral-small", 131072},
	{"gemma-3", 131072},
	{"gemma3", 131072},
	{"phi-4", 16384},
}

// TableWindow returns the built-in table's context window for model, or 0.
func TableWindow(model string) int {
	m := strings.ToLower(model)
	for _, k := range knownWindows {
		if strings.Contains(m, k.match) {
			return k.tokens
		}
	}
	return 0
}

// resolveWindow: flag, then environment, then the server (what it said
// within windowTTL, remembered by the WindowCache, else asked now), then
// the table, then the default with a warning. It returns the window and
// its source.
func (a *Agent) resolveWindow(ctx context.Context) (int, string) {
	if a.spec.ContextWindow > 0 {
		return a.spec.ContextWindow, "flag"
	}
	if v := strings.TrimSpace(a.getenv(EnvContextWindow)); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n, "environment"
		}
		a.warn(EnvContextWindow + "=" + v + " is not a positive whole number; ignored")
	}
	if n, ok := a.opts.WindowCache.get(a.spec.Model); ok {
		if n > 0 {
			return n, "server"
		}
	} else if cw, ok := a.prov.(provider.ContextWindower); ok {
		n := cw.ContextWindow(ctx, a.spec.Model)
		if ctx.Err() == nil {
			a.opts.WindowCache.put(a.spec.Model, n)
		}
		if n > 0 {
			return n, "server"
		}
	}
	if n := TableWindow(a.spec.Model); n > 0 {
		return n, "table"
	}
	a.warn("the context window of model " + a.spec.Model + " is unknown; assuming " + strconv.Itoa(DefaultContextWindow) +
		" tokens (pass --context-window or set " + EnvContextWindow + ")")
	return DefaultContextWindow, "default"
}
