package diskwatch

import "golang.org/x/sys/unix"

// tmpfsUse is what the tmpfs mounted at m holds (0 if it is not a tmpfs).
func tmpfsUse(m string) (bytes, inodes int64) {
	var st unix.Statfs_t
	if unix.Statfs(m, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return 0, 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Files - st.Ffree)
}
