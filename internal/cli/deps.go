package cli

import (
	"context"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/policy"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Deps are the implementations the CLI works with. The wiring
// (internal/wire) chooses them; the CLI sees only their seams.
type Deps struct {
	// OpenStore opens the run store of data directory home.
	OpenStore func(home string) (run.Store, error)
	// Coordinator keeps data directory home's leases, queue and slots.
	Coordinator func(home string) coord.Coordinator
	// Backends returns the sandbox backends in help order; executable is
	// the agentrun binary their sandboxes run ("" = this process's own).
	Backends func(executable string) []sandbox.Backend
	// DefaultBackend is used when none is named ("" = none isolates on
	// this platform).
	DefaultBackend string
	// Agents are the agent CLI profiles.
	Agents agent.Catalog
	// Providers are the built-in agent's model providers.
	Providers provider.Registry
	// Workspaces checks results out for the bench's acceptance (the
	// supervisor's workspace provider).
	Workspaces workspace.Provider
	// OpenServer opens the team server's database at url (agentrun
	// server): sqlite:PATH or postgres://....
	OpenServer func(ctx context.Context, url string, o server.BackendOptions) (*server.Backend, error)
	// InspectRepo, when set, replaces how submit reads the repository's
	// state (the server's bare project repositories; see submit.Service).
	InspectRepo func(ctx context.Context, dir, ref string) (path, base string, dirty bool, err error)
	// Mode is the mode submit records in provenance ("" = lite).
	Mode string
	// StartAhead: a Lite submit starts its run's supervisor process while
	// it reads the repository and writes the record, and hands it the run
	// once that is done (supervisor.Prespawn). The agentrun binary's
	// wiring sets it; a test that runs commands in its own process does
	// not, its executable being no agentrun binary.
	StartAhead bool
	// Policy is the organization policy the server read when it started
	// (nil: none), in force when PolicyFixed; otherwise each command
	// reads the one its settings name (policyInForce).
	Policy      *policy.Org
	PolicyFixed bool
	// BuildSetup finds or makes the setup layer of the planned run r in
	// data directory home's layer cache, working in scratch (agentrun
	// setup; nil: this build cannot).
	BuildSetup func(ctx context.Context, r *run.Run, home, scratch string, event func(run.Event)) (workspace.SetupLayer, error)
	// SupervisorDeps are the supervisor's seams for runs kept in st under
	// l, with the coordinator of l (agentrun worker --server: an agent
	// host's runs; nil: this build has no agent host).
	SupervisorDeps func(st run.Store, l layout.Layout) supervisor.Deps
}

// backends are the sandbox backends by name.
func (d Deps) backends(executable string) map[string]sandbox.Backend {
	m := map[string]sandbox.Backend{}
	for _, b := range d.Backends(executable) {
		m[b.Name()] = b
	}
	return m
}

// sweepers are the backends that can leave sandboxes behind, by name.
func (d Deps) sweepers(executable string) map[string]sandbox.Sweeper {
	if d.Backends == nil {
		return nil
	}
	m := map[string]sandbox.Sweeper{}
	for _, b := range d.Backends(executable) {
		if sw, ok := b.(sandbox.Sweeper); ok {
			m[b.Name()] = sw
		}
	}
	return m
}

// backendNames are the backend names in help order.
func (d Deps) backendNames() []string {
	var n []string
	for _, b := range d.Backends("") {
		n = append(n, b.Name())
	}
	return n
}

// isolates reports whether the backend called name isolates anything
// (true for a backend this build does not have: nothing to warn about).
func (d Deps) isolates(name string) bool {
	for _, b := range d.Backends("") {
		if b.Name() == name {
			return !b.Isolation().None()
		}
	}
	return true
}

// submitService is the submit planning service over these implementations.
func (d Deps) submitService() *submit.Service {
	return &submit.Service{Backends: d.backends(""), DefaultBackend: d.DefaultBackend, CachePreflight: true,
		Agents: d.Agents, Providers: d.Providers, Inspect: d.InspectRepo, Mode: d.Mode}
}
