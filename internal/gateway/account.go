package gateway

import "github.com/agentrun/agentrun/internal/run"

// Usage is a run's model use, as the run record keeps it.
type Usage = run.Usage

// addTo adds one response to u.
func addTo(u *Usage, model string, t Tokens, cost float64, priced bool) {
	u.Add(run.Usage{PromptTokens: t.Input, CompletionTokens: t.Output, CachedTokens: t.Cached, CacheWriteTokens: t.CacheWrite,
		Requests: 1, CostUSD: cost, Models: map[string]run.ModelUsage{model: {
			PromptTokens: t.Input, CompletionTokens: t.Output, CachedTokens: t.Cached, CacheWriteTokens: t.CacheWrite,
			Requests: 1, CostUSD: cost, Unpriced: !priced}}})
}
