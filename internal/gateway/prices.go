package gateway

import (
	"strings"

	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
)

// Price is what a model costs, in US dollars per million tokens.
type Price = run.Price

// Cost is the price of t at p, in US dollars.
func Cost(p Price, t Tokens) float64 {
	cached, write := p.Input, p.Input*1.25
	if p.CachedInput != nil {
		cached = *p.CachedInput
	}
	if p.CacheWrite != nil {
		write = *p.CacheWrite
	}
	plain := max(t.Input-t.Cached-t.CacheWrite, 0)
	return (float64(plain)*p.Input + float64(t.Cached)*cached + float64(t.CacheWrite)*write + float64(t.Output)*p.Output) / 1e6
}

func pp(v float64) *float64 { return &v }

// builtinPrices are list prices of common models (USD per million tokens;
// a model name matches the longest entry it starts with, after a date
// suffix is removed). They are estimates for budgets, not invoices:
// override or extend them with [prices."MODEL"] in config.toml.
var builtinPrices = map[string]Price{
	"claude-opus-4-5":       {Input: 5, Output: 25, CachedInput: pp(0.5), CacheWrite: pp(6.25)},
	"claude-opus-4-6":       {Input: 5, Output: 25, CachedInput: pp(0.5), CacheWrite: pp(6.25)},
	"claude-opus-4-1":       {Input: 15, Output: 75, CachedInput: pp(1.5), CacheWrite: pp(18.75)},
	"claude-opus-4":         {Input: 15, Output: 75, CachedInput: pp(1.5), CacheWrite: pp(18.75)},
	"claude-sonnet-4":       {Input: 3, Output: 15, CachedInput: pp(0.3), CacheWrite: pp(3.75)},
	"claude-3-7-sonnet":     {Input: 3, Output: 15, CachedInput: pp(0.3), CacheWrite: pp(3.75)},
	"claude-haiku-4-5":      {Input: 1, Output: 5, CachedInput: pp(0.1), CacheWrite: pp(1.25)},
	"claude-3-5-haiku":      {Input: 0.8, Output: 4, CachedInput: pp(0.08), CacheWrite: pp(1)},
	"gpt-5":                 {Input: 1.25, Output: 10, CachedInput: pp(0.125)},
	"gpt-5-mini":            {Input: 0.25, Output: 2, CachedInput: pp(0.025)},
	"gpt-5-nano":            {Input: 0.05, Output: 0.4, CachedInput: pp(0.005)},
	"gpt-4.1":               {Input: 2, Output: 8, CachedInput: pp(0.5)},
	"gpt-4.1-mini":          {Input: 0.4, Output: 1.6, CachedInput: pp(0.1)},
	"gpt-4.1-nano":          {Input: 0.1, Output: 0.4, CachedInput: pp(0.025)},
	"gpt-4o":                {Input: 2.5, Output: 10, CachedInput: pp(1.25)},
	"gpt-4o-mini":           {Input: 0.15, Output: 0.6, CachedInput: pp(0.075)},
	"o3":                    {Input: 2, Output: 8, CachedInput: pp(0.5)},
	"o4-mini":               {Input: 1.1, Output: 4.4, CachedInput: pp(0.275)},
	"codex-mini":            {Input: 1.5, Output: 6, CachedInput: pp(0.375)},
	"gemini-2.5-pro":        {Input: 1.25, Output: 10, CachedInput: pp(0.125)},
	"gemini-2.5-flash":      {Input: 0.3, Output: 2.5, CachedInput: pp(0.03)},
	"gemini-2.5-flash-lite": {Input: 0.1, Output: 0.4, CachedInput: pp(0.01)},
	"gemini-3-pro":          {Input: 2, Output: 12, CachedInput: pp(0.2)},
	"qwen3-coder-plus":      {Input: 1, Output: 5, CachedInput: pp(0.1)},
	"qwen3-coder-flash":     {Input: 0.3, Output: 1.5, CachedInput: pp(0.03)},
}

// Prices looks a model's price up: the overrides first, then the built-in
// table; by exact name, then by the longest entry the name starts with.
type Prices struct {
	Overrides map[string]Price
	// Free makes every model without a known price cost nothing (a local
	// model server).
	Free bool
}

var dateSuffix = lazyre.New(`[-@](20\d{6}|\d{4}-\d{2}-\d{2}|latest)$`)

// Lookup returns the price of model, and whether one is known.
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := lookup(p.Overrides, model); ok {
		return pr, true
	}
	if pr, ok := lookup(builtinPrices, model); ok {
		return pr, true
	}
	return Price{}, p.Free
}

func lookup(table map[string]Price, model string) (Price, bool) {
	if pr, ok := table[model]; ok {
		return pr, true
	}
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:] // provider/model
	}
	name = dateSuffix.ReplaceAllString(name, "")
	best, found := "", false
	for k := range table {
		if strings.HasPrefix(name, strings.ToLower(k)) && len(k) > len(best) {
			best, found = k, true
		}
	}
	if !found {
		return Price{}, false
	}
	return table[best], true
}
