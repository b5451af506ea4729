//go:build unix

package files

import (
	"os"
	"syscall"
)

// openNoFollow opens path with flag, never through a symlink at its last
// component and never blocking on a FIFO or device.
func openNoFollow(path string, flag int) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
}
