package submit

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// mountingHost stands in for a backend that mounts overlays (the real
// ones need a kernel that lets them): only its type matters here.
type mountingHost struct{ sandbox.Backend }

func (mountingHost) ProbeLayers(context.Context, string) error { return nil }

// TestEstimateWorkspace: a copy asked for costs the base commit's
// checkout, an auto copy twice that for a commit the cache lacks (the
// layer, then the copy of it) and once after; an overlay the checkout for
// a commit the cache lacks, nothing once its layer is cached; included
// files add their blocks.
func TestEstimateWorkspace(t *testing.T) {
	ctx := context.Background()
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": strings.Repeat("a", 10000), "b.txt": "b\n"})
	l := layout.Layout{Home: t.TempDir()}
	r := &run.Run{Repo: repo, Base: base}
	const checkout = 12288 + 4096 + (10000+2)/2
	for _, c := range []struct {
		mode  string
		b     sandbox.Backend
		bytes int64
		what  string
	}{
		{run.WorkspaceCopy, mountingHost{host.New()}, checkout, "a full copy"},
		{run.WorkspaceAuto, host.New(), 2 * checkout, "a new layer for the base commit, and a full copy"},
		{run.WorkspaceAuto, mountingHost{host.New()}, checkout, "a new layer"},
	} {
		r.Workspace.Mode = c.mode
		// The estimate is read while the rest is planned (estimateCheckout).
		est, err := estimateWorkspace(l, c.b, r, estimateCheckout(ctx, Request{Data: &l, Workspace: r.Workspace}, c.b, r))
		if err != nil || est.Bytes != c.bytes || !strings.Contains(est.What, c.what) {
			t.Errorf("%s on %T: %+v %v", c.mode, c.b, est, err)
		}
	}
	cache := workspace.NewLayerCache(l.LayerCache())
	t.Cleanup(cache.Wait)
	if _, err := workspace.NewOverlay(cache).Create(ctx, repo, base, filepath.Join(l.Home, "ws"), filepath.Join(l.Home, "state")); err != nil {
		t.Fatal(err)
	}
	r.Workspace.Mode = run.WorkspaceAuto
	r.Provenance.Included = []run.IncludedFile{{Path: ".env", Size: 5}}
	est, err := estimateWorkspace(l, mountingHost{host.New()}, r, func() (int64, error) {
		t.Error("a cached layer's workspace read the base's size")
		return 0, nil
	})
	if err != nil || est.Bytes != 4096 || !strings.Contains(est.What, "cached layer") {
		t.Fatalf("cached: %+v %v", est, err)
	}
	if est, err := estimateWorkspace(l, host.New(), r, func() (int64, error) { return checkout, nil }); err != nil || est.Bytes != checkout+4096 || est.What != "a full copy of the base commit" {
		t.Fatalf("a copy of a cached layer: %+v %v", est, err)
	}
	if n := cache.CachedBytes(); n < checkout/2 {
		t.Fatalf("the cache holds %d", n)
	}
	// The layer counts against the budget; the new workspace adds nothing.
	req := Request{Data: &l, DiskBudget: cache.CachedBytes() + 4096 - 1}
	if err := planDisk(ctx, req, mountingHost{host.New()}, r, estimateCheckout(ctx, req, mountingHost{host.New()}, r)); !catalog.Has(err, catalog.DiskBudget) {
		t.Fatalf("over the budget: %v", err)
	}
	req.DiskBudget += 1 << 20
	if err := planDisk(ctx, req, mountingHost{host.New()}, r, estimateCheckout(ctx, req, mountingHost{host.New()}, r)); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
}
