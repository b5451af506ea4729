//go:build unix

package submit

import "golang.org/x/sys/unix"

// freeBytes is the space available to the user on dir's file system.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
