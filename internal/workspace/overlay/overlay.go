// Package overlay is the overlay file system a copy-on-write workspace is
// made of: the read-only lower layer (a cached checkout of the base
// commit), the run's upper layer (what the agent changed) and the
// kernel's work directory, mounted as one tree where the agent works.
//
// It is the one place that knows how the layers are mounted and so how
// the kernel records changes in the upper layer: the workspace's scan
// reads the upper layer by these rules, and the sandbox mounts the layers
// with Mount. The mount always uses the user.overlay.* extended
// attributes (userxattr), as root or in a user namespace alike, so the
// markers the scan reads are the same wherever the mount happened; with
// them the kernel neither writes nor follows redirects or metacopy
// markers, so a file's content in the upper layer is its whole content.
//
// It must never mount anything but an overlay of the three given
// directories, with nosuid and nodev.
package overlay

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Layers are the directories of one overlay, absolute host paths. Upper
// and Work must be on the same file system; Lower is never written.
type Layers struct {
	Lower string `json:"lower"`
	// Above are further read-only layers stacked over Lower, uppermost
	// first (a run's setup layer); none are written either.
	Above []string `json:"above,omitempty"`
	Upper string   `json:"upper"`
	Work  string   `json:"work"`
}

// OpaqueXattr marks a directory of the upper layer that replaces the
// lower layer's directory of the same path (its value is "y"). Under
// userxattr the kernel keeps the trusted.overlay.* names for nothing, and
// an agent setting user.overlay.* through the mount gets its attribute
// escaped (user.overlay.overlay.*): only the kernel writes this one.
const OpaqueXattr = "user.overlay.opaque"

// IsWhiteout reports an upper-layer entry that deletes the lower layer's
// entry of the same path: a character device numbered 0/0.
func IsWhiteout(st *unix.Stat_t) bool {
	return uint32(st.Mode)&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// ErrUnsupported: this system has no overlay file system.
var ErrUnsupported = errors.New("overlay mounts are not supported on this system")
