package gateway

import (
	"fmt"
	"net/http"
	"time"
)

// When the gateway gives up on a model server (Failing). An agent CLI
// retries a refused key and an unreachable server with backoff for
// minutes (Claude Code: 11 requests over 3 minutes for a 401), and
// nothing in the run can mend either: the key is read once, when the
// gateway starts.
const (
	// KeyRefusals is how many model requests in a row the model server
	// must refuse with 401, none answered in between, to fail the run's
	// key: one could be the server's glitch.
	KeyRefusals = 2
	// DefaultUnreachableFor is Options.UnreachableFor's default: long
	// enough for a local model server to restart.
	DefaultUnreachableFor = time.Minute
	// unreachedRequests is how many model requests must have failed to
	// reach the server over UnreachableFor.
	unreachedRequests = 3
)

// health is how a route's model server has answered model requests.
type health struct {
	refused   int       // 401s in a row
	down      int       // requests that did not reach it in a row
	downSince time.Time // the first of those
}

// Failing says why the gateway gave up on a model server ("" while it
// has not): it refused the run's key (401) on KeyRefusals model requests
// in a row, or no model request reached it for UnreachableFor.
func (g *Gateway) Failing() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failing
}

// answered notes a model request's answer from route's server.
func (g *Gateway) answered(route string, status int) {
	g.mu.Lock()
	h := g.healthOf(route)
	h.down, h.downSince = 0, time.Time{}
	switch {
	case status == http.StatusUnauthorized:
		h.refused++
	case status < 300:
		h.refused = 0
	}
	n := h.refused
	g.mu.Unlock()
	if n >= KeyRefusals {
		rt := g.o.Routes[route]
		why := fmt.Sprintf("the model server %s refused model requests without a key (%d %s) %d times in a row: agentrun has no key for it",
			redact(rt.Upstream), status, http.StatusText(status), n)
		if src := rt.Credential.Source; src != "" {
			why = fmt.Sprintf("the model server %s refused the key from %s (%d %s) on %d model requests in a row",
				redact(rt.Upstream), src, status, http.StatusText(status), n)
		}
		g.fail(route, status, why)
	}
}

// unreached notes a model request that did not reach route's server.
func (g *Gateway) unreached(route string) {
	now := time.Now()
	g.mu.Lock()
	h := g.healthOf(route)
	if h.down == 0 {
		h.downSince = now
	}
	h.down++
	n, since := h.down, now.Sub(h.downSince)
	g.mu.Unlock()
	if n >= unreachedRequests && since >= g.o.UnreachableFor {
		g.fail(route, 0, fmt.Sprintf("the model server %s could not be reached for %s (%d model requests in a row)",
			redact(g.o.Routes[route].Upstream), since.Round(time.Second), n))
	}
}

func (g *Gateway) healthOf(route string) *health {
	h := g.health[route]
	if h == nil {
		h = &health{}
		g.health[route] = h
	}
	return h
}

// fail gives up on the model server, once.
func (g *Gateway) fail(route string, status int, why string) {
	g.mu.Lock()
	first := g.failing == ""
	if first {
		g.failing = why
	}
	g.mu.Unlock()
	if !first {
		return
	}
	data := map[string]any{"route": route, "upstream": redact(g.o.Routes[route].Upstream)}
	if status != 0 {
		data["status"] = status
	}
	g.o.OnEvent(Event{Kind: "model_failing", Message: why, Data: data})
	g.o.OnFailing(why)
}
