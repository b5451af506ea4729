package supervisor

// Wiring of parts that are not in this build yet; each function is replaced
// by the real implementation when its package lands.

import (
	"context"

	"github.com/agentrun/agentrun/internal/agent"
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


func isNoChanges(err error) bool { return false }

// repoInfo is what submit needs to know about the user's repository.
type repoInfo struct {
	Path  string // top level
	Base  string // resolved base commit
	Dirty bool
}

func inspectRepo(ctx context.Context, dir, ref string) (repoInfo, error) {
	return repoInfo{}, errMissing("repository inspection")
}


// checkBuiltin validates the built-in agent's settings at submit time.
func checkBuiltin(ctx context.Context, spec run.AgentSpec, getenv func(string) string) error {
	return errMissing("the built-in agent")
}
