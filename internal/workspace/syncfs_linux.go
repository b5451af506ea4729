package workspace

import "golang.org/x/sys/unix"

// syncFS writes the file system holding the open fd to disk.
func syncFS(fd int) error { return unix.Syncfs(fd) }
