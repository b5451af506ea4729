package supervisor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/loop"
	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/anthropic"
	"github.com/agentrun/agentrun/internal/agent/provider/openai"
	"github.com/agentrun/agentrun/internal/catalog"
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

// checkBuiltinModel asks the built-in agent's model server (a server the
// user named, not a provider's public API) which models it has: a model it
// lacks, or a key it refuses, is caught at submit rather than as failed
// attempts. A server that cannot list its models is not an error here.
func checkBuiltinModel(ctx context.Context, spec run.AgentSpec, rs run.RouteSpec, getenv func(string) string) error {
	if rs.Server == "" {
		return nil
	}
	key := ""
	if len(rs.Keys) > 0 {
		cred, ok, _ := gateway.ResolveKey(ctx, rs, getenv)
		if ok {
			key = cred.Value
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	var have []provider.ModelInfo
	var err error
	if builtinRouteName(spec.Provider) == gateway.RouteAnthropic {
		have, err = anthropic.New(anthropic.Config{BaseURL: rs.URL, APIKey: key, HTTPClient: client}).Models(lctx)
	} else {
		have, err = openai.New(openai.Config{BaseURL: rs.URL + "/v1", APIKey: key, HTTPClient: client}).Models(lctx)
	}
	var he *provider.HTTPError
	if errors.As(err, &he) && (he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden) {
		src := "no key is configured for it"
		if len(rs.Keys) > 0 {
			src = "its key comes from " + rs.Keys[0].Describe()
		}
		return catalog.ModelAuth.Wrap(err, "model server %s answered %s to the model list; %s", rs.Server, http.StatusText(he.Status), src)
	}
	if err != nil || len(have) == 0 {
		return nil
	}
	for _, m := range have {
		if m.ID == spec.Model {
			return nil
		}
	}
	return provider.NotLoaded(spec.Model, have)
}
