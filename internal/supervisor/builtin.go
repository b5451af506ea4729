package supervisor

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/loop"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
)

// newBuiltin makes the built-in tool-use loop. It runs in the supervisor:
// API keys come from the handed-off environment and never enter the
// sandbox.
func newBuiltin(r *run.Run, getenv func(string) string, warn func(string), gw *agent.Gateway) (agent.Agent, error) {
	spec := r.Agent
	opts := loop.Options{Getenv: getenv, Repo: r.Repo, Base: r.Base, Warn: warn}
	if gw != nil {
		// The loop runs here, in the supervisor: it talks to the gateway's
		// socket directly, with the placeholder; the gateway holds the key.
		route := builtinRouteName(spec.Provider)
		spec.BaseURL = "http://gateway/" + route
		if route == gateway.RouteOpenAI {
			spec.BaseURL += "/v1"
		}
		opts.HTTPClient = unixClient(gw.Socket)
		opts.Getenv = func(k string) string {
			switch k {
			case "AGENTRUN_OPENAI_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY":
				return gw.Key
			}
			return getenv(k)
		}
	}
	return loop.New(spec, opts)
}

// builtinRouteName is the gateway route of the built-in agent's provider.
func builtinRouteName(provider string) string {
	if provider == "anthropic" {
		return gateway.RouteAnthropic
	}
	return gateway.RouteOpenAI
}

// unixClient is an HTTP client whose every connection goes to socket.
func unixClient(socket string) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// checkBuiltin validates the built-in agent's settings at submit time
// (model given, provider known). Its key is the gateway's to find.
func checkBuiltin(_ context.Context, spec run.AgentSpec, getenv func(string) string) error {
	_, err := loop.New(spec, loop.Options{Getenv: func(k string) string {
		if k == "ANTHROPIC_API_KEY" {
			return "checked-by-the-gateway"
		}
		return getenv(k)
	}})
	return err
}
