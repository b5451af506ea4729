package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/all"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Deps are the seams the supervisor drives. Main fills them from the run
// record in this one place; the steps only call them.
type Deps struct {
	Store      run.Store
	Layout     layout.Layout
	Workspaces workspace.Provider
	Export     func(ctx context.Context, cs *workspace.ChangeSet, opts workspace.ExportOptions) (*run.ExportResult, error)
	Backends   map[string]sandbox.Backend
	// NewAgent makes the agent for the run; getenv reads the handed-off
	// environment (secrets stay in the supervisor); warn journals a
	// warning for the user.
	NewAgent func(r *run.Run, getenv func(string) string, warn func(string)) (agent.Agent, error)
	// StartEgress starts the egress proxy for the run on a unix socket and
	// returns a stop function.
	StartEgress func(ctx context.Context, r *run.Run, socket string, onRecord func(egress.Record)) (stop func(context.Context) error, err error)
}

// DefaultDeps wires the implementations this build has.
func DefaultDeps(st run.Store, l layout.Layout) Deps {
	return Deps{
		Store:       st,
		Layout:      l,
		Workspaces:  workspaceProvider(),
		Export:      exportFunc(),
		Backends:    all.Backends(all.Options{}),
		NewAgent:    newAgent,
		StartEgress: startEgress,
	}
}

// newAgent picks the agent implementation for the run.
func newAgent(r *run.Run, getenv func(string) string, warn func(string)) (agent.Agent, error) {
	if r.Agent.Name == BuiltinAgent {
		return newBuiltin(r, getenv, warn)
	}
	return external.New(r.Agent)
}

// BuiltinAgent is the AgentSpec.Name of the built-in tool-use loop.
const BuiltinAgent = "builtin"

// proxySocket is the egress socket path for a run: in its sandbox dir,
// or a short temp dir when that path is too long for a unix socket.
func proxySocket(l layout.Layout, id string) (path string, cleanup func(), err error) {
	p := filepath.Join(l.SandboxState(id), "egress.sock")
	if len(p) < 100 {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", nil, err
		}
		return p, func() { os.Remove(p) }, nil
	}
	dir, err := os.MkdirTemp("", "ar-eg-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, "egress.sock"), func() { os.RemoveAll(dir) }, nil
}

func errMissing(what string) error { return fmt.Errorf("%s is not available in this build", what) }
