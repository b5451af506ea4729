package submit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// diskReserve is room kept beyond the new workspace's estimate for what
// else a run writes at first: its record, journal and logs.
const diskReserve = 1 << 20

// diskEntries bounds how many entries the count of the runs' workspaces
// looks at; past it the count is a floor (a budget passed by the floor
// is passed).
const diskEntries = 2_000_000

// workspaceEstimate is what the new run's workspace is expected to add to
// the disk, and what that is, for the messages.
type workspaceEstimate struct {
	Bytes int64
	What  string
}

// planDisk checks, before anything is created, that the new run's
// workspace fits: within the free space of the data directory's file
// system, and with a disk budget, within it together with what the runs'
// workspaces and the layer cache hold already.
func planDisk(ctx context.Context, req Request, b sandbox.Backend, r *run.Run, checkout func() (int64, error)) error {
	if req.Data == nil {
		return nil
	}
	est, err := estimateWorkspace(*req.Data, b, r, checkout)
	if err != nil {
		return nil // the repository was read a moment ago: no estimate, no check
	}
	if free, ok := freeBytes(existingParent(req.Data.Home)); ok && free < est.Bytes+diskReserve {
		return catalog.DiskFull.New("%s is free on the file system of %s; this run's workspace needs about %s (%s)",
			run.FormatSize(free), req.Data.Home, run.FormatSize(est.Bytes+diskReserve), est.What)
	}
	if req.DiskBudget <= 0 {
		return nil
	}
	runs, partial := runsWorkspaceBytes(*req.Data)
	cache := workspace.NewLayerCache(req.Data.LayerCache()).CachedBytes()
	if total := runs + cache + est.Bytes; total > req.DiskBudget {
		atLeast := ""
		if partial {
			atLeast = "at least "
		}
		return catalog.DiskBudget.New("the runs' workspaces hold %s%s and the layer cache %s; with this run's workspace (about %s: %s) that is %s%s, over disk_budget %s",
			atLeast, run.FormatSize(runs), run.FormatSize(cache), run.FormatSize(est.Bytes), est.What, atLeast, run.FormatSize(total), run.FormatSize(req.DiskBudget))
	}
	return nil
}

// estimateWorkspace estimates the new run's workspace: the base commit's
// checkout for a copy (twice for an auto workspace's copy on a commit not
// cached yet: the copy is made from a new layer); for an overlay nothing
// on a cached layer (the upper layer starts empty), the layer for a
// commit not cached yet; plus the files included from the working tree.
// An auto workspace on a backend that mounts overlays is taken for an
// overlay.
func estimateWorkspace(l layout.Layout, b sandbox.Backend, r *run.Run, checkout func() (int64, error)) (workspaceEstimate, error) {
	var inc int64
	for _, f := range r.Provenance.Included {
		inc += (f.Size + 4095) &^ 4095
	}
	overlay := overlayLikely(b, r.Workspace)
	if overlay && workspace.NewLayerCache(l.LayerCache()).Cached(r.Base) {
		return workspaceEstimate{inc, "an overlay on the cached layer of the base commit"}, nil
	}
	n, err := checkout()
	if err != nil {
		return workspaceEstimate{}, err
	}
	if overlay {
		return workspaceEstimate{n + inc, "an overlay, and a new layer for the base commit"}, nil
	}
	if r.Workspace.ModeOrAuto() != run.WorkspaceCopy && !workspace.NewLayerCache(l.LayerCache()).Cached(r.Base) {
		return workspaceEstimate{2*n + inc, "a new layer for the base commit, and a full copy of it"}, nil
	}
	return workspaceEstimate{n + inc, "a full copy of the base commit"}, nil
}

// overlayLikely reports whether a run asking for w on b gets an overlay
// workspace (an auto workspace on a backend that mounts overlays is taken
// for one).
func overlayLikely(b sandbox.Backend, w run.WorkspaceSpec) bool {
	_, mounts := b.(sandbox.LayerMounter)
	return w.ModeOrAuto() != run.WorkspaceCopy && mounts
}

// estimateCheckout starts reading the size of a checkout of r's base (one
// git ls-tree) when planDisk will need it, so that it runs while the rest
// of the run is planned; the function returned waits for it.
func estimateCheckout(ctx context.Context, req Request, b sandbox.Backend, r *run.Run) func() (int64, error) {
	commits := req.Commits
	if req.Data == nil || (overlayLikely(b, req.Workspace) && workspace.NewLayerCache(req.Data.LayerCache()).Cached(r.Base)) {
		return func() (int64, error) { return commits.CheckoutBytes(ctx, r.Repo, r.Base) }
	}
	type answer struct {
		n   int64
		err error
	}
	ch := make(chan answer, 1)
	repo, base := r.Repo, r.Base
	go func() {
		n, err := commits.CheckoutBytes(ctx, repo, base)
		ch <- answer{n, err}
	}()
	return sync.OnceValues(func() (int64, error) {
		a := <-ch
		return a.n, a.err
	})
}

// runsWorkspaceBytes adds up the runs' workspaces (with an overlay, the
// upper layer only) and their state, within diskEntries (partial: the
// count stopped there and is a floor).
func runsWorkspaceBytes(l layout.Layout) (n int64, partial bool) {
	ents, err := os.ReadDir(l.Runs())
	if err != nil {
		return 0, false
	}
	left := diskEntries
	for _, e := range ents {
		if !e.IsDir() || run.ValidateID(e.Name()) != nil {
			continue
		}
		for _, dir := range []string{l.Workspace(e.Name()), l.WorkspaceState(e.Name())} {
			if left <= 0 {
				return n, true
			}
			b, seen, complete := workspace.DiskUse(dir, left)
			n, left = n+b, left-seen
			partial = partial || !complete
		}
	}
	return n, partial
}

// existingParent is dir, or its nearest parent that exists (the data
// directory may not be made yet).
func existingParent(dir string) string {
	for {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}
