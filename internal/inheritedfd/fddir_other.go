//go:build unix && !linux

package inheritedfd

// fdDir lists this process's open descriptors (fdescfs on macOS and the
// BSDs).
const fdDir = "/dev/fd"
