package submit

import (
	"context"

	"github.com/agentrun/agentrun/internal/workspace"
)

// repoInfo is what submit needs to know about the user's repository.
type repoInfo struct {
	Path  string // top level
	Base  string // resolved base commit
	Dirty bool
}

// inspectRepo opens the user's repository (catalog errors: RepoMissing,
// NotGitRepo, NoCommits, GitMissing, UnknownBase) and reads its state; its
// git processes run side by side.
func (s *Service) inspectRepo(ctx context.Context, dir, ref string) (repoInfo, error) {
	if s.Inspect != nil {
		path, base, dirty, err := s.Inspect(ctx, dir, ref)
		if err != nil {
			return repoInfo{}, err
		}
		return repoInfo{Path: path, Base: base, Dirty: dirty}, nil
	}
	repo, base, dirty, err := workspace.Inspect(ctx, dir, ref)
	if err != nil {
		return repoInfo{}, err
	}
	return repoInfo{Path: repo.Path(), Base: base, Dirty: dirty}, nil
}
