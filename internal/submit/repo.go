package submit

import (
	"context"
	"path/filepath"
	"strings"

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

// subdir is dir (the directory the submit names) relative to the
// repository's top level top, slash-separated: "" for the top itself, and
// for a dir that is not below it or cannot be resolved (a team server's
// project repository is its own top).
func subdir(top, dir string) string {
	abs, err := filepath.Abs(dir)
	if dir == "" || err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	rel, err := filepath.Rel(top, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}
