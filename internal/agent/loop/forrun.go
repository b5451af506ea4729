package loop

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// ForRun makes the built-in loop for run r as the supervisor runs it. It
// runs in the supervisor, not in the sandbox: with a model gateway (gw not
// nil) it talks to the gateway's unix socket directly, with the
// placeholder key, and the gateway holds the real one; API keys come from
// the handed-off environment (getenv) and never enter the sandbox.
func ForRun(r *run.Run, opts Options, gw *agent.Gateway) (agent.Agent, error) {
	spec := r.Agent
	opts.Repo, opts.Base = r.Repo, r.Base
	if gw != nil {
		kind, ok := opts.Providers.Lookup(spec.Provider)
		if ok {
			spec.BaseURL = "http://gateway/" + kind.Route + kind.URLPath
		}
		opts.HTTPClient = unixClient(gw.Socket)
		if opts.WindowCache != nil && opts.WindowCache.Server == "" {
			// Behind the gateway the base URL is the same for every server:
			// the cache is keyed by the route's upstream.
			c := *opts.WindowCache
			c.Server = routeUpstream(r, kind.Route)
			opts.WindowCache = &c
		}
		getenv := opts.Getenv
		opts.Getenv = func(k string) string {
			for _, e := range kind.KeyEnv {
				if k == e {
					return gw.Key
				}
			}
			return getenv(k)
		}
	}
	if opts.WindowCache != nil && opts.WindowCache.Server == "" && gw == nil {
		c := *opts.WindowCache
		c.Server = spec.BaseURL
		opts.WindowCache = &c
	}
	return New(spec, opts)
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

// routeUpstream is the URL the run's gateway route sends to ("" when the
// run has no such route).
func routeUpstream(r *run.Run, route string) string {
	if r.Gateway == nil {
		return ""
	}
	for _, rs := range r.Gateway.Routes {
		if rs.Name == route {
			return rs.URL
		}
	}
	return ""
}
