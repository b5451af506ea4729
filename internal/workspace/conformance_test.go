package workspace_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/workspace"
	"github.com/agentrun/agentrun/internal/workspace/workspacetest"
)

func TestCheckoutConformance(t *testing.T) {
	t.Parallel()
	workspacetest.Run(t, workspace.NewCheckout())
}

// One cache for the whole suite: fixtures made in the same second share
// their commit, and so a layer, made once under its lock.
func TestOverlayConformance(t *testing.T) {
	t.Parallel()
	c := workspace.NewLayerCache(t.TempDir())
	t.Cleanup(c.Wait)
	workspacetest.Run(t, workspace.NewOverlay(c))
}

// The copy of a cached layer, its cache shared by the suite as above.
func TestLayerCopyConformance(t *testing.T) {
	t.Parallel()
	c := workspace.NewLayerCache(t.TempDir())
	t.Cleanup(c.Wait)
	workspacetest.Run(t, workspace.NewLayerCopy(c))
}

func BenchmarkConformance(b *testing.B) {
	b.Run("checkout", func(b *testing.B) { workspacetest.Bench(b, workspace.NewCheckout()) })
	b.Run("overlay", func(b *testing.B) {
		c := workspace.NewLayerCache(b.TempDir())
		b.Cleanup(c.Wait)
		workspacetest.Bench(b, workspace.NewOverlay(c))
	})
	b.Run("layercopy", func(b *testing.B) {
		c := workspace.NewLayerCache(b.TempDir())
		b.Cleanup(c.Wait)
		workspacetest.Bench(b, workspace.NewLayerCopy(c))
	})
}
