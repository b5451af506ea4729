//go:build !linux

package overlay

// Mount fails: there is no overlay file system here.
func Mount(Layers, string) error { return ErrUnsupported }

// Unmount fails: there is no overlay file system here.
func Unmount(string) error { return ErrUnsupported }

// IsOpaque reports no directory opaque: no overlay wrote it here.
func IsOpaque(int) (bool, error) { return false, nil }
