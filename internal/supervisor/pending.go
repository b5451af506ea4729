package supervisor

// Wiring of parts that are not in this build yet; each function is replaced
// by the real implementation when its package lands.

import (
	"context"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

func workspaceProvider() workspace.Provider { return nil }

func exportFunc() func(ctx context.Context, cs *workspace.ChangeSet, opts workspace.ExportOptions) (*run.ExportResult, error) {
	return nil
}

func newBuiltin(r *run.Run, getenv func(string) string) (agent.Agent, error) {
	return nil, errMissing("the built-in agent")
}

func startEgress(ctx context.Context, r *run.Run, socket string, onRecord func(egress.Record)) (func(context.Context) error, error) {
	return nil, errMissing("the egress proxy")
}

func isNoChanges(err error) bool { return false }
