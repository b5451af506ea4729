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

func BenchmarkConformance(b *testing.B) {
	workspacetest.Bench(b, workspace.NewCheckout())
}
