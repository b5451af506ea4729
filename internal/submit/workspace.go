package submit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// validateWorkspace checks the workspace's mode, history and include
// patterns without reading anything.
func validateWorkspace(w run.WorkspaceSpec) error {
	switch w.Mode {
	case "", run.WorkspaceAuto, run.WorkspaceCopy, run.WorkspaceOverlay:
	default:
		return catalog.BadWorkspace.New("%s %q", f("workspace"), w.Mode)
	}
	switch w.History {
	case "", run.HistoryShallow, run.HistoryFull:
	default:
		return catalog.BadHistory.New("%s %q", f("history"), w.History)
	}
	if w.NoInclude && len(w.Include) > 0 {
		return catalog.ConflictFlags.New("%s and %s", f("include"), f("no_include"))
	}
	for _, p := range w.Include {
		if strings.TrimSpace(p) == "" || strings.ContainsAny(p, "\x00\n\r") || strings.HasPrefix(p, "#") {
			return catalog.BadInclude.New("%s %q is not a gitignore-style pattern", f("include"), p)
		}
	}
	return nil
}

// planWorkspace records what the run asks of its workspace and checks,
// before anything is created, that the sandbox can give it: the
// read-only paths shown at their own paths (checkShown), an overlay
// asked for by name must mount (the backend's probe, in the data
// directory's cache, where the layers will be); full history needs a
// backend that shows only named paths, read-only, and makes the
// repository's object directories such paths. It returns the files to
// include from the working tree.
func (s *Service) planWorkspace(ctx context.Context, req Request, b sandbox.Backend, r *run.Run) ([]run.IncludedFile, error) {
	if !req.OnHosts { // (on a team's hosts, their own paths replace these)
		if err := checkShown(b, r, req.ReadOnly); err != nil {
			return nil, err
		}
	}
	w := req.Workspace
	w.Mode, w.History = w.ModeOrAuto(), w.HistoryOrShallow()
	if w.Mode == run.WorkspaceOverlay {
		lm, ok := b.(sandbox.LayerMounter)
		if !ok {
			return nil, catalog.NoOverlay.New("the %s sandbox mounts no overlay", r.Sandbox.Backend)
		}
		if req.Data != nil {
			if err := lm.ProbeLayers(ctx, req.Data.Cache()); err != nil {
				return nil, catalog.NoOverlay.Wrap(err, "the %s sandbox: %v", r.Sandbox.Backend, err)
			}
		}
	}
	if w.History == run.HistoryFull {
		if !b.Isolation().Files {
			return nil, catalog.NoFullHistory.New("the %s sandbox shows the agent all your files, writable: it cannot show the repository's objects read-only", r.Sandbox.Backend)
		}
		dirs, err := workspace.ObjectDirs(ctx, r.Repo)
		if err != nil {
			return nil, catalog.NoFullHistory.Wrap(err, "%v", err)
		}
		if c, ok := b.(sandbox.ReadOnlyChecker); ok {
			for _, d := range dirs {
				if err := c.CheckReadOnly(d); err != nil {
					return nil, catalog.NoFullHistory.Wrap(err, "the %s sandbox cannot show %s: %v", r.Sandbox.Backend, d, err)
				}
			}
		}
		w.Objects = dirs
		ro := append(slices.Clone(r.Sandbox.ReadOnlyPaths), dirs...)
		slices.Sort(ro)
		r.Sandbox.ReadOnlyPaths = slices.Compact(ro)
	}
	r.Workspace = w
	return planInclude(ctx, w, r.Repo)
}

// planInclude resolves the git-ignored files of the user's working tree
// to copy into the workspace: those its .worktreeinclude lists (unless
// turned off) and those the request's patterns match. The list is read
// from the user's working tree, never from a commit: it names the user's
// own files.
func planInclude(ctx context.Context, w run.WorkspaceSpec, repo string) ([]run.IncludedFile, error) {
	if bareRepo(repo) {
		// A team server's project repository: no working tree, nothing
		// of the user's to include.
		if len(w.Include) > 0 {
			return nil, catalog.BadInclude.New("%s is a bare repository: it has no working tree to include files from", repo)
		}
		return nil, nil
	}
	var patterns []string
	if !w.NoInclude {
		fromFile, _, err := workspace.ReadIncludeList(repo)
		if err != nil {
			return nil, includeError(err)
		}
		patterns = fromFile
	}
	patterns = append(patterns, w.Include...)
	files, err := workspace.ResolveInclude(ctx, repo, patterns)
	if err != nil {
		return nil, includeError(err)
	}
	return files, nil
}

// includeError is the catalog error of a file that cannot be included.
func includeError(err error) error {
	var ie *workspace.IncludeError
	switch {
	case errors.As(err, &ie):
		return catalog.BadInclude.Wrap(err, "%s: %s", ie.Path, ie.Why)
	case errors.Is(err, workspace.ErrIncludeTooLarge):
		return catalog.IncludeTooLarge.Wrap(err, "%v (at most %d files, %d MiB)", err, workspace.MaxIncludeFiles, workspace.MaxIncludeBytes>>20)
	}
	return catalog.BadInclude.Wrap(err, "%v", err)
}

// bareRepo reports a repository without a working tree: its directory is
// the git directory itself.
func bareRepo(repo string) bool {
	if _, err := os.Lstat(filepath.Join(repo, ".git")); err == nil {
		return false
	}
	for _, p := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			return false
		}
	}
	return true
}

// checkShown refuses, before anything is made, a read-only path of r that
// backend b cannot show at its own path (one of the sandbox's own mounts
// takes it, e.g. its HOME): a path named with --ro (named, as given) is a
// bad_path; one the agent needs (its CLI's package, its interpreter, the
// agent command's program) is agent_not_visible. Without the check the
// run would fail as its sandbox starts.
func checkShown(b sandbox.Backend, r *run.Run, named []string) error {
	c, ok := b.(sandbox.ReadOnlyChecker)
	if !ok {
		return nil
	}
	byFlag := map[string]bool{}
	for _, p := range named {
		if abs, err := filepath.Abs(p); err == nil {
			byFlag[abs] = true
		}
	}
	for _, p := range r.Sandbox.ReadOnlyPaths {
		err := c.CheckReadOnly(p)
		switch {
		case err == nil:
		case byFlag[p]:
			return catalog.BadPath.Wrap(err, "%s %s cannot be shown in the %s sandbox: %v", f("ro"), p, r.Sandbox.Backend, err)
		default:
			// (err names p: the CLI itself, its package or its interpreter)
			who := "the " + r.Agent.Name + " profile's CLI " + r.Agent.Binary
			switch {
			case r.Agent.Name == agent.CommandName:
				who = "the agent command's program"
			case slices.Contains(r.Agent.Helpers, p):
				who = "the program " + p + " that the " + r.Agent.Name + " profile's CLI runs"
			}
			return catalog.AgentHidden.Wrap(err, "%s cannot be shown in the %s sandbox: %v", who, r.Sandbox.Backend, err)
		}
	}
	return nil
}
