package supervisor

import (
	"context"
	"errors"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

func workspaceProvider() workspace.Provider { return workspace.NewCheckout() }

func exportFunc() func(ctx context.Context, cs *workspace.ChangeSet, opts workspace.ExportOptions) (*run.ExportResult, error) {
	return workspace.Export
}

// configIdentity reads the author from the user's repository.
var configIdentity = workspace.ConfigIdentity

func isNoChanges(err error) bool { return errors.Is(err, workspace.ErrNoChanges) }

// repoInfo is what submit needs to know about the user's repository.
type repoInfo struct {
	Path  string // top level
	Base  string // resolved base commit
	Dirty bool
}

// inspectRepo opens the user's repository (catalog errors: RepoMissing,
// NotGitRepo, NoCommits, GitMissing, UnknownBase) and reads its state; its
// git processes run side by side.
func inspectRepo(ctx context.Context, dir, ref string) (repoInfo, error) {
	repo, base, dirty, err := workspace.Inspect(ctx, dir, ref)
	if err != nil {
		return repoInfo{}, err
	}
	return repoInfo{Path: repo.Path(), Base: base, Dirty: dirty}, nil
}
