package native

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPlaceFDs: received descriptors reach their numbers even where the
// kernel gave one of them its own target (it is not dup'ed onto itself,
// which fails) or another's (the swap: neither replaces the other before
// it is moved), without close-on-exec, and the received ones are closed.
func TestPlaceFDs(t *testing.T) {
	pipe := func() (int, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		fd, err := unix.Dup(int(r.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return fd, w
	}
	for _, swap := range []bool{false, true} {
		a, wa := pipe()
		b, wb := pipe()
		to := [][]int{{a}, {b}}
		if swap {
			to = [][]int{{b}, {a}}
		}
		if err := placeFDs([]int{a, b}, to); err != nil {
			t.Fatalf("swap %v: %v", swap, err)
		}
		for i, w := range []*os.File{wa, wb} {
			fd := to[i][0]
			if _, err := w.Write([]byte{byte('a' + i)}); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1)
			if n, err := unix.Read(fd, buf); n != 1 || err != nil || buf[0] != byte('a'+i) {
				t.Errorf("swap %v: fd %d read %q (%v), want pipe %c's byte", swap, fd, buf[:max(n, 0)], err, 'a'+i)
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
				t.Errorf("swap %v: fd %d flags %d (%v), want no close-on-exec", swap, fd, flags, err)
			}
			unix.Close(fd)
		}
	}
}
