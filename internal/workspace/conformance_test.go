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
	workspacetest.Run(t, workspace.NewOverlay(workspace.NewLayerCache(t.TempDir())))
}

func BenchmarkConformance(b *testing.B) {
	b.Run("checkout", func(b *testing.B) { workspacetest.Bench(b, workspace.NewCheckout()) })
	b.Run("overlay", func(b *testing.B) {
		workspacetest.Bench(b, workspace.NewOverlay(workspace.NewLayerCache(b.TempDir())))
	})
}
