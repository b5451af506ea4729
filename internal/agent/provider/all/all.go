// Package all lists the model providers of this build, explicitly, in
// this one file. A new provider is one more entry here; nothing registers
// itself.
package all

import (
	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/anthropic"
	"github.com/agentrun/agentrun/internal/agent/provider/openai"
	"github.com/agentrun/agentrun/internal/gateway"
)

// Providers returns the registry; the first entry is the default.
func Providers() provider.Registry {
	return provider.Registry{
		{
			Name: "openai", Route: gateway.RouteOpenAI, URLPath: "/v1",
			KeyEnv: []string{"AGENTRUN_OPENAI_API_KEY", "OPENAI_API_KEY"},
			New: func(c provider.Config) provider.Provider {
				return openai.New(openai.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, HTTPClient: c.HTTPClient, Retry: c.Retry})
			},
		},
		{
			Name: "anthropic", Route: gateway.RouteAnthropic,
			KeyEnv: []string{"ANTHROPIC_API_KEY"}, RequiresKey: true,
			New: func(c provider.Config) provider.Provider {
				return anthropic.New(anthropic.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, HTTPClient: c.HTTPClient, Retry: c.Retry})
			},
		},
	}
}
