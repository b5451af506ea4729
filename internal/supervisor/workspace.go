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

func isNoChanges(err error) bool { return errors.Is(err, workspace.ErrNoChanges) }

// repoInfo is what submit needs to know about the user's repository.
type repoInfo struct {
	Path  string // top level
	Base  string // resolved base commit
	Dirty bool
}

// inspectRepo opens the user's repository (catalog errors: RepoMissing,
// NotGitRepo, NoCommits, GitMissing, UnknownBase) and reads its state.
func inspectRepo(ctx context.Context, dir, ref string) (repoInfo, error) {
	repo, err := workspace.OpenRepo(ctx, dir)
	if err != nil {
		return repoInfo{}, err
	}
	base, err := repo.ResolveBase(ctx, ref)
	if err != nil {
		return repoInfo{}, err
	}
	dirty, err := repo.Dirty(ctx)
	if err != nil {
		return repoInfo{}, err
	}
	return repoInfo{Path: repo.Path(), Base: base, Dirty: dirty}, nil
}
