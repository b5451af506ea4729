package native

import (
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
)

// Name is the backend's --sandbox name.
const Name = warmstart.Backend

// Options configure the backend.
type Options struct {
	// Executable is the agentrun binary each sandbox's pid 1 (the init,
	// which also serves the runner) is started from; it is not visible
	// inside. Default: os.Executable().
	Executable string
	// ReadOnlyPaths are host paths made visible read-only at the same path
	// in every sandbox (e.g. /usr/local/go, /opt). Missing ones are
	// skipped; Spec.ReadOnlyPaths, in contrast, must exist.
	ReadOnlyPaths []string
	// AllowNoLandlock is the explicit opt-in to run on a kernel without
	// Landlock. Without it Preflight and Start refuse such a kernel with a
	// catalog error. The environment variable AGENTRUN_NATIVE_NO_LANDLOCK=1
	// opts in as well.
	AllowNoLandlock bool
}

// Backend is the native backend. Use New; it is a sandbox.Backend.
type Backend struct {
	opts Options
}

// New returns the native backend. It registers nothing.
func New(opts Options) sandbox.Backend {
	return &Backend{opts: opts}
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return Name }

// Isolation implements sandbox.Backend: namespaces and Landlock keep the
// files, processes and network; Preflight refuses a machine without them.
func (b *Backend) Isolation() sandbox.Isolation {
	return sandbox.Isolation{Files: true, Processes: true, Network: true}
}

var _ sandbox.Backend = (*Backend)(nil)
