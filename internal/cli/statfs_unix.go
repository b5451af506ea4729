//go:build unix

package cli

import "golang.org/x/sys/unix"

// freeBytes is the space available to the user on dir's filesystem.
func freeBytes(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
