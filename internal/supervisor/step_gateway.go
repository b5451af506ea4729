package supervisor

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/pidtemp"
	"github.com/agentrun/agentrun/internal/run"
)

// gatewayStep is the run's model gateway, the only way its agent reaches a
// model. A run without gateway routes has none: Start does nothing and
// every method answers as "no gateway" (as they do on a nil step).
//
// Start reads the keys (here, on the host, from the handed-off
// environment, key files or key commands; none is written anywhere) and
// serves the gateway on a unix socket in the run's sandbox state directory
// (or a short temp dir). What the gateway reports (requests, refusals,
// budget) is journaled as gateway events. Stop closes the gateway and
// removes its socket; it is safe twice and before Start. Usage and
// Exceeded stay readable after Stop.
type gatewayStep struct {
	// Record (the run record) gives the routes, the budget and the usage spent before (resume).
	Record   *run.Run
	Layout   layout.Layout
	Getenv   func(string) string
	Capacity gateway.Capacity
	Event    func(run.Event)

	gw     *gateway.Gateway
	socket string
	clean  func()
	routes []string
	closed bool

	mu     sync.Mutex
	onStop func(cause error) // ends the current attempt
}

// Start implements resource.
func (g *gatewayStep) Start(ctx context.Context) error {
	r := g.Record
	if r.Gateway == nil || len(r.Gateway.Routes) == 0 {
		return nil
	}
	routes, err := gateway.Routes(ctx, r.Gateway, g.Getenv)
	if err != nil {
		return fmt.Errorf("model gateway: %w", err)
	}
	var names []string
	for _, rs := range r.Gateway.Routes {
		names = append(names, rs.Name)
	}
	hn := g.hostNet()
	gw, err := gateway.New(gateway.Options{
		Token:     gateway.NewToken(),
		Routes:    routes,
		Transport: hn.Transport(),
		Budget:    gateway.Budget{MaxTokens: r.Gateway.MaxTokens, MaxCost: r.Gateway.MaxCost},
		Spent:     r.Usage,
		Capacity:  g.Capacity,
		OnEvent: func(e gateway.Event) {
			data := map[string]any{"kind": e.Kind}
			for k, v := range e.Data {
				data[k] = v
			}
			g.Event(run.NewEvent(run.EventGateway, e.Message, data))
		},
		OnExceeded: func(string) { g.stopAttempt(errBudget) },
		OnFailing:  func(string) { g.stopAttempt(errModelFailing) },
	})
	if err != nil {
		return fmt.Errorf("model gateway: %w", err)
	}
	sock, clean, err := socketPath(g.Layout, r.ID, "gateway.sock")
	if err != nil {
		return fmt.Errorf("model gateway socket: %w", err)
	}
	if err := gw.Listen(sock); err != nil {
		clean()
		return err
	}
	g.gw, g.socket, g.clean, g.routes = gw, sock, clean, names
	return nil
}

// hostNet is how the gateway reaches the run's model servers, as the
// submitting user's CLIs would (gateway.NetEnv, handed over with the
// run): it journals each route that goes through a proxy, and the
// certificate files that added nothing.
func (g *gatewayStep) hostNet() gateway.HostNet {
	hn := gateway.NewHostNet(g.Getenv)
	for _, w := range hn.Warnings {
		g.Event(run.NewEvent(run.EventGateway, "the model gateway could not add trusted certificates from "+w+"; it trusts the system's and any others named",
			map[string]any{"kind": "certificates"}))
	}
	seen := map[string]bool{} // an agent command's routes may share a server
	for _, rs := range g.Record.Gateway.Routes {
		u, err := url.Parse(rs.URL)
		if err != nil || seen[rs.URL] {
			continue
		}
		seen[rs.URL] = true
		if p, err := hn.Proxy(u); err == nil && p != nil {
			p.User = nil
			g.Event(run.NewEvent(run.EventGateway, fmt.Sprintf("model traffic to %s goes through the proxy %s", gateway.RedactRaw(rs.URL), p),
				map[string]any{"kind": "proxy", "route": rs.Name, "proxy": p.String()}))
		}
	}
	return hn
}

// Stop implements resource.
func (g *gatewayStep) Stop(context.Context) {
	if !g.running() || g.closed {
		return
	}
	g.closed = true
	g.gw.Close()
	g.clean()
}

// running reports a gateway that Start started.
func (g *gatewayStep) running() bool { return g != nil && g.gw != nil }

// Socket is the gateway's unix socket on the host ("" without a gateway).
func (g *gatewayStep) Socket() string {
	if !g.running() {
		return ""
	}
	return g.socket
}

// announce journals that the gateway serves the sandbox at addr, the
// address the sandbox bridged it to.
func (g *gatewayStep) announce(addr string) {
	if !g.running() {
		return
	}
	r := g.Record
	g.Event(run.NewEvent(run.EventGateway, "model gateway started at http://"+addr+" ("+strings.Join(g.routes, ", ")+")",
		map[string]any{"kind": "started", "routes": r.Gateway.Routes, "max_tokens": r.Gateway.MaxTokens, "max_cost": r.Gateway.MaxCost}))
}

// access is how an attempt in the sandbox reaches the gateway, at addr
// on the sandbox's loopback.
func (g *gatewayStep) access(addr string) *agent.Gateway {
	if !g.running() || addr == "" {
		return nil
	}
	a := g.host()
	a.URL = "http://" + addr
	return a
}

// host is how an agent in the supervisor (the built-in loop) reaches the
// gateway: its socket (nil without a gateway).
func (g *gatewayStep) host() *agent.Gateway {
	if !g.running() {
		return nil
	}
	return &agent.Gateway{Key: g.gw.Placeholder(), Routes: g.routes, Socket: g.socket}
}

// setStop sets what ends the current attempt when the budget is spent
// or the model server fails (nil: nothing).
func (g *gatewayStep) setStop(f func(cause error)) {
	if !g.running() {
		return
	}
	g.mu.Lock()
	g.onStop = f
	g.mu.Unlock()
}

// stopAttempt ends the current attempt, if any, for cause.
func (g *gatewayStep) stopAttempt(cause error) {
	g.mu.Lock()
	f := g.onStop
	g.mu.Unlock()
	if f != nil {
		f(cause)
	}
}

// usage is the run's usage so far (nil without a gateway).
func (g *gatewayStep) usage() *run.Usage {
	if !g.running() {
		return nil
	}
	u := g.gw.Usage()
	return &u
}

// exceeded says why the budget is spent ("" while it is not, or without
// a gateway).
func (g *gatewayStep) exceeded() string {
	if !g.running() {
		return ""
	}
	return g.gw.Exceeded()
}

// failing says why the gateway gave up on the model server ("" while it
// has not, or without a gateway).
func (g *gatewayStep) failing() string {
	if !g.running() {
		return ""
	}
	return g.gw.Failing()
}

// socketPath is a unix socket path for a run: in its sandbox dir, or a
// short temp dir when that path is too long for a unix socket. The temp
// dir is named after this process, so that one a killed supervisor left
// goes with the next one made (pidtemp).
func socketPath(l layout.Layout, id, name string) (path string, cleanup func(), err error) {
	p := filepath.Join(l.SandboxState(id), name)
	if len(p) < 100 {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", nil, err
		}
		return p, func() { os.Remove(p) }, nil
	}
	dir, err := pidtemp.MkdirTemp("ar-sock-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, name), func() { os.RemoveAll(dir) }, nil
}
