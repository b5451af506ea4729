package supervisor

import (
	"context"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/loop"
	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/workspace"
)

// testDeps are the supervisor's seams as the wiring makes them, with the
// host backend (the wiring package imports this one, so its tests cannot
// import it).
func testDeps(st run.Store, l layout.Layout) Deps {
	return Deps{
		Store:      st,
		Coord:      flock.New(l.Home),
		Layout:     l,
		Workspaces: workspace.NewCheckout(),
		Layers:     workspace.NewLayerCache(l.LayerCache()),
		Export:     workspace.Export,
		Backends:   map[string]sandbox.Backend{"host": host.New()},
		NewAgent: func(r *run.Run, getenv func(string) string, warn func(string), gw *agent.Gateway) (agent.Agent, error) {
			if r.Agent.Name == agent.BuiltinName {
				return loop.ForRun(r, loop.Options{Getenv: getenv, Warn: warn, Providers: all.Providers()}, gw)
			}
			return external.New(r.Agent)
		},
		StartEgress: func(ctx context.Context, r *run.Run, socket string, _ func(string) string, onRecord func(egress.Record)) (func(context.Context) error, error) {
			return egress.StartProxy(ctx, r.Sandbox.Allow, socket, egress.Upstream{}, onRecord)
		},
		Capacity: gateway.FlockCapacity{Dir: l.Capacity()},
	}
}

// testHome is the data directory's runs over store st.
func testHome(st run.Store, l layout.Layout) Home {
	return Home{Store: st, Coord: flock.New(l.Home), Layout: l}
}
