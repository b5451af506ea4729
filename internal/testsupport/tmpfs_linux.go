package testsupport

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size (e.g. "1m") at dir, made if missing, and
// unmounts it when the test ends. It needs root: elsewhere the test skips
// (or fails where capabilities are required).
func Tmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700")
	Require(t, "a tmpfs mount (root)", err == nil, "%v", err)
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

// FillDisk appends to the file at path until its file system is full, to
// the last byte (ENOSPC).
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range []int{64 << 10, 4 << 10, 1} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
}
