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
	// The status walk is the slow part on a big tree: run it beside the
	// base lookup.
	var dirty bool
	var dirtyErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		dirty, dirtyErr = repo.Dirty(ctx)
	}()
	base, err := repo.ResolveBase(ctx, ref)
	<-done
	if err != nil {
		return repoInfo{}, err
	}
	if dirtyErr != nil {
		return repoInfo{}, dirtyErr
	}
	return repoInfo{Path: repo.Path(), Base: base, Dirty: dirty}, nil
}
