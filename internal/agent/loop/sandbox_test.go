package loop

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
)

// startHost starts a host-backend sandbox over ws and returns its runner
// and the workspace path as seen inside. It is destroyed when tb ends.
func startHost(tb testing.TB, ws string) (runner.Client, string) {
	tb.Helper()
	sb, err := host.New().Start(context.Background(), sandbox.Spec{
		RunID: "abcdefghij", Workspace: ws, StateDir: filepath.Join(tb.TempDir(), "state"),
		Env:     []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"},
		Network: sandbox.NetworkNone,
	})
	if err != nil {
		tb.Fatalf("start host sandbox: %v", err)
	}
	tb.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb.Runner(), sb.WorkDir()
}
