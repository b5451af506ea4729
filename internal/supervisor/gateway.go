package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// errBudget ends an attempt whose model budget is spent.
var errBudget = errors.New("the run's model budget is spent")

// budgetGrace is how long an agent told that the budget is spent may take
// to end on its own before it is stopped.
const budgetGrace = 2 * time.Second

// gatewayState is the run's model gateway while the supervisor lives.
type gatewayState struct {
	gw     *gateway.Gateway
	socket string
	clean  func()
	routes []string

	mu       sync.Mutex
	onBudget func() // ends the current attempt
}

// startGateway starts the run's model gateway on a unix socket in the
// sandbox state directory. Keys are read here, on the host, from the
// handed-off environment, key files or key commands; none is written
// anywhere.
func (s *Supervisor) startGateway(ctx context.Context, rc *runState) error {
	r := rc.r
	if r.Gateway == nil || len(r.Gateway.Routes) == 0 {
		return nil
	}
	routes, err := gateway.Routes(ctx, r.Gateway, s.getenv)
	if err != nil {
		return fmt.Errorf("model gateway: %w", err)
	}
	st := &gatewayState{}
	for _, rs := range r.Gateway.Routes {
		st.routes = append(st.routes, rs.Name)
	}
	gw, err := gateway.New(gateway.Options{
		Token:    gateway.NewToken(),
		Routes:   routes,
		Budget:   gateway.Budget{MaxTokens: r.Gateway.MaxTokens, MaxCost: r.Gateway.MaxCost},
		Spent:    r.Usage,
		Capacity: s.Capacity,
		OnEvent: func(e gateway.Event) {
			data := map[string]any{"kind": e.Kind}
			for k, v := range e.Data {
				data[k] = v
			}
			s.event(run.NewEvent(run.EventGateway, e.Message, data))
		},
		OnExceeded: func(string) {
			st.mu.Lock()
			f := st.onBudget
			st.mu.Unlock()
			if f != nil {
				f()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("model gateway: %w", err)
	}
	sock, clean, err := socketPath(s.Layout, r.ID, "gateway.sock")
	if err != nil {
		return fmt.Errorf("model gateway socket: %w", err)
	}
	if err := gw.Listen(sock); err != nil {
		clean()
		return err
	}
	st.gw, st.socket, st.clean = gw, sock, clean
	rc.gw = st
	return nil
}

// stop closes the gateway and removes its socket.
func (g *gatewayState) stop() {
	if g == nil {
		return
	}
	g.gw.Close()
	g.clean()
}

// access is how an attempt in the sandbox reaches the gateway, at addr
// on the sandbox's loopback.
func (g *gatewayState) access(addr string) *agent.Gateway {
	if g == nil || addr == "" {
		return nil
	}
	a := g.host()
	a.URL = "http://" + addr
	return a
}

// host is how an agent in the supervisor (the built-in loop) reaches the
// gateway: its socket (nil without a gateway).
func (g *gatewayState) host() *agent.Gateway {
	if g == nil {
		return nil
	}
	return &agent.Gateway{Key: g.gw.Placeholder(), Routes: g.routes, Socket: g.socket}
}

// setBudgetStop sets what ends the current attempt when the budget is
// spent (nil: nothing).
func (g *gatewayState) setBudgetStop(f func()) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.onBudget = f
	g.mu.Unlock()
}

// socketPath is a unix socket path for a run: in its sandbox dir, or a
// short temp dir when that path is too long for a unix socket.
func socketPath(l layout.Layout, id, name string) (path string, cleanup func(), err error) {
	p := filepath.Join(l.SandboxState(id), name)
	if len(p) < 100 {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", nil, err
		}
		return p, func() { os.Remove(p) }, nil
	}
	dir, err := os.MkdirTemp("", "ar-sock-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, name), func() { os.RemoveAll(dir) }, nil
}

// usage is the run's usage so far (nil without a gateway).
func (g *gatewayState) usage() *run.Usage {
	if g == nil {
		return nil
	}
	u := g.gw.Usage()
	return &u
}

// exceeded says why the budget is spent ("" while it is not, or without
// a gateway).
func (g *gatewayState) exceeded() string {
	if g == nil {
		return ""
	}
	return g.gw.Exceeded()
}

// continueSession reports whether attempt n of r follows an earlier one
// (of this supervisor or a previous one), whose agent CLI session the new
// attempt continues. first is this supervisor's first attempt number.
func continueSession(r *run.Run, first, n int) bool {
	return len(r.Attempts) > 0 || n > first
}
