package prefault

import (
	"syscall"
	"testing"
	"unsafe"
)

// TestHeapAheadIsResident: the initializer made the heap above its anchor
// resident, every page of it, including the pages the test binary's heap
// has not reached (without the initializer they are not resident).
func TestHeapAheadIsResident(t *testing.T) {
	if !hasPopulate(t) {
		t.Skip("the kernel is older than 5.14: no MADV_POPULATE_WRITE, nothing is made resident")
	}
	if Populated.Len < chunk {
		t.Fatalf("populated %d bytes at %#x, want at least %d", Populated.Len, Populated.Start, chunk)
	}
	page := uintptr(syscall.Getpagesize())
	vec := make([]byte, Populated.Len/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, Populated.Start, Populated.Len, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of the %d pages at %#x are not resident", missing, len(vec), Populated.Start)
	}
}

// hasPopulate says whether the running kernel is 5.14 or later.
func hasPopulate(t *testing.T) bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	major, minor, n := 0, 0, 0
	for _, c := range u.Release {
		switch {
		case c >= '0' && c <= '9' && n == 0:
			major = major*10 + int(c-'0')
		case c >= '0' && c <= '9' && n == 1:
			minor = minor*10 + int(c-'0')
		case c == '.' && n < 1:
			n++
		default:
			return major > 5 || (major == 5 && minor >= 14)
		}
	}
	return major > 5 || (major == 5 && minor >= 14)
}

// BenchmarkFirstTouch maps a fresh Span of anonymous memory and writes a
// byte to each page: "faults" takes a page fault on each, "populated"
// makes the range resident first, as the initializer does. (The unmap is
// not timed.)
func BenchmarkFirstTouch(b *testing.B) {
	for _, populate := range []bool{false, true} {
		name := map[bool]string{false: "faults", true: "populated"}[populate]
		b.Run(name, func(b *testing.B) {
			page := syscall.Getpagesize()
			for b.Loop() {
				mem, err := syscall.Mmap(-1, 0, Span, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
				if err != nil {
					b.Fatal(err)
				}
				if populate {
					if err := syscall.Madvise(mem, madvPopulateWrite); err != nil {
						b.Fatal(err)
					}
				}
				for i := 0; i < len(mem); i += page {
					mem[i] = 1
				}
				b.StopTimer() // the unmap costs both the same
				if err := syscall.Munmap(mem); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
