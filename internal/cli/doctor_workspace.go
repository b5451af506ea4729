package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// checkWorkspace says what a new run's workspace will be with backend b
// (the default one): an overlay when b mounts one on the data
// directory's file system (tried for real), else a full copy, and why.
func checkWorkspace(ctx context.Context, b sandbox.Backend, home string) doctorCheck {
	c := doctorCheck{Name: "workspace"}
	if b == nil {
		c.Status, c.Detail = "warn", "full copies of the repository: no default sandbox backend"
		return c
	}
	lm, ok := b.(sandbox.LayerMounter)
	if !ok {
		c.Status, c.Detail = "warn", "full copies of the repository: the "+b.Name()+" sandbox mounts no overlay"
		return c
	}
	// A scratch directory of its own, on the data directory's file
	// system: a real mount, not one remembered from an earlier probe.
	cache := layout.Layout{Home: home}.Cache()
	_ = os.MkdirAll(cache, 0o755)
	scratch, err := os.MkdirTemp(cache, "doctor-")
	if err != nil {
		c.Status, c.Detail = "warn", "cannot try an overlay: "+err.Error()
		return c
	}
	defer os.RemoveAll(scratch)
	if err := lm.ProbeLayers(ctx, scratch); err != nil {
		c.Status, c.Detail = "warn", "full copies of the repository: "+err.Error()
		c.Fix = "overlay workspaces need Linux 5.11 or later with overlayfs, and unprivileged overlay mounts in user namespaces (or agentrun as root); runs work as they are, with a copy each"
		return c
	}
	c.Status, c.Detail = "ok", "copy-on-write overlays: the "+b.Name()+" sandbox mounts them here (a run holds only its changes)"
	return c
}

// checkLayerCache reports the overlay workspaces' layer cache against its
// budget.
func checkLayerCache(home string, budget int64) doctorCheck {
	if budget <= 0 {
		budget = config.DefaultCacheBudget
	}
	cache := workspace.NewLayerCache(layout.Layout{Home: home}.LayerCache())
	c := doctorCheck{Name: "layer_cache", Path: cache.Dir()}
	if _, err := os.Stat(cache.Dir()); err != nil {
		c.Status, c.Detail = "ok", fmt.Sprintf("empty (budget %s)", humanBytes(budget))
		return c
	}
	layers, err := cache.List()
	if err != nil {
		c.Status, c.Detail = "warn", "cannot be read: "+err.Error()
		return c
	}
	var total int64
	unused := 0
	for _, l := range layers {
		total += l.Bytes
		if l.Workspaces == 0 {
			unused++
		}
	}
	c.Status = "ok"
	c.Detail = fmt.Sprintf("%s in %s (%s unused), budget %s", humanBytes(total), plural(len(layers), "layer"), plural(unused, "layer"), humanBytes(budget))
	if total > budget {
		c.Status = "warn"
		c.Fix = "run 'agentrun gc' (it removes unused layers, least recently used first), or raise cache_budget in config.toml"
	}
	return c
}
