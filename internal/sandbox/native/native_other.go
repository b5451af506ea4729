//go:build !linux

package native

import (
	"context"
	"io"
	"runtime"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox"
)

func unavailable() error {
	return catalog.SandboxPreflight.Wrap(sandbox.ErrUnavailable, "the native sandbox needs Linux, this is %s", runtime.GOOS).
		WithFix("run agentrun on Linux, or use --sandbox host to run without isolation (explicit opt-in)")
}

// Preflight implements sandbox.Backend: native needs Linux.
func (b *Backend) Preflight(ctx context.Context) error { return unavailable() }

// Start implements sandbox.Backend: native needs Linux.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, unavailable()
}

// Command runs one command in a fresh sandbox: native needs Linux.
func (b *Backend) Command(ctx context.Context, spec sandbox.Spec, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, map[string]string, error) {
	return -1, nil, unavailable()
}

// Main is the "__sandbox" entry point: native needs Linux.
func Main(args []string) int { return 70 }

// Prewarm implements sandbox.Prewarmer: native needs Linux, it does nothing.
func (b *Backend) Prewarm(ctx context.Context) {}
