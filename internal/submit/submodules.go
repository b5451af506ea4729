package submit

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/workspace"
)

// submodulesFile is where a commit names its submodules.
const submodulesFile = ".gitmodules"

// submoduleWarning says, for a base commit that has submodules, that the
// workspace holds their directories empty and does not export what the
// agent puts there (the workspace is made from the base commit's own
// tree; a submodule's commit lives in another repository). "" for a base
// without, or whose .gitmodules cannot be read (it is then not known).
// It reads .gitmodules through cache (one git cat-file for a base not
// seen before).
func submoduleWarning(ctx context.Context, cache *workspace.CommitCache, repo, base string) string {
	data, ok, err := cache.FileAt(ctx, repo, base, submodulesFile)
	if err != nil || !ok {
		return ""
	}
	paths := submodulePaths(string(data))
	if len(paths) == 0 {
		return ""
	}
	named := strings.Join(paths[:min(len(paths), 3)], ", ")
	if len(paths) > 3 {
		named += fmt.Sprintf(" and %d more", len(paths)-3)
	}
	return fmt.Sprintf("the base commit has submodules (%s): their directories are empty in the workspace, and what the agent writes in them is not exported", named)
}

// submodulePaths are the path values of a .gitmodules file (git config
// syntax: `path = lib` under `[submodule "lib"]`), in order.
func submodulePaths(gitmodules string) []string {
	var paths []string
	for line := range strings.SplitSeq(gitmodules, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "path") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if v != "" {
			paths = append(paths, v)
		}
	}
	return paths
}
