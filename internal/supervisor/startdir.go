package supervisor

import (
	"context"
	"path"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// startDir is where the agent and the checks start in sb: the run's
// Subdir (the directory the submit named) inside the workspace, or the
// workspace itself when the run names none, or when it is no directory
// there (not in the base commit, or the agent removed it): missing is then
// true.
func startDir(ctx context.Context, sb sandbox.Sandbox, sub string) (dir string, missing bool) {
	root := sb.WorkDir()
	if sub == "" {
		return root, false
	}
	st, err := sb.Runner().Stat(ctx, runner.StatRequest{Path: sub})
	if err != nil || !st.Exists || st.Type != "dir" {
		return root, true
	}
	return path.Join(root, sub), false
}
