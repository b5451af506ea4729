package workspace_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/workspace"
	"github.com/agentrun/agentrun/internal/workspace/workspacetest"
)

func TestCheckoutConformance(t *testing.T) {
	t.Parallel()
	workspacetest.Exercise(t, workspace.NewCheckout())
}
