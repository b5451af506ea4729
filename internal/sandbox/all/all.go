// Package all lists the sandbox backends explicitly, in this one file.
// A new backend is one more line here; nothing registers itself.
package all

import (
	"runtime"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/sandbox/native"
)

// Options configure the backends.
type Options struct {
	// Executable is the agentrun binary that backends run inside the
	// sandbox (default: the running executable).
	Executable string
	// ReadOnlyPaths are extra host paths made visible read-only.
	ReadOnlyPaths []string
}

// List returns every backend of this build, in help order.
func List(opts Options) []sandbox.Backend {
	return []sandbox.Backend{
		native.New(native.Options{Executable: opts.Executable, ReadOnlyPaths: opts.ReadOnlyPaths}),
		docker.New(docker.Options{Executable: opts.Executable, ReadOnlyPaths: opts.ReadOnlyPaths}),
		host.New(),
	}
}

// Default is the backend used when none is named: native on Linux. There
// is none elsewhere (yet): the host backend never becomes a default, since
// it does not isolate.
func Default() string {
	if runtime.GOOS == "linux" {
		return native.Name
	}
	return ""
}
