package submit

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
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

// Subdir is dir (the directory the submit names) relative to the
// repository's top level top, slash-separated, as a run records it
// (run.Run.Subdir): "" for the top itself, and for a dir that is not
// below it or cannot be resolved (a team server's project repository is
// its own top).
func Subdir(top, dir string) string {
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

// namedSubdir is the directory a request names (Request.Subdir, a
// trailing slash dropped), which must be one of the base commit's.
func namedSubdir(ctx context.Context, repo, base, dir string) (string, error) {
	dir = strings.TrimRight(dir, "/")
	ok, err := workspace.IsDirAt(ctx, repo, base, dir)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", catalog.Usage.New("%s %q is not a directory of the base commit %s", f("subdir"), dir, short(base)).
			WithFix("name a directory the base commit has, relative to the repository's top (like services/api), or leave %s out to start at the top", f("subdir"))
	}
	return dir, nil
}
