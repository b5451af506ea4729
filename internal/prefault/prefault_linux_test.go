package prefault

import (
	"syscall"
	"testing"
	"unsafe"
)

// TestHeapAheadIsResident: the initializer made the heap above its anchor
// resident, every page of it, including the pages the test binary's heap
// has not reached (without the initializer they are not resident): the
// first chunk, and the rest of the span where it measured faults dear.
func TestHeapAheadIsResident(t *testing.T) {
	if !hasPopulate(t) {
		t.Skip("the kernel is older than 5.14: no MADV_POPULATE_WRITE, nothing is made resident")
	}
	t.Logf("a page made resident: %d ns; a first touch: %d ns", Populated.PageNs, Populated.FaultNs)
	switch {
	case Populated.Len == 0 || Populated.PageNs <= 0:
		t.Fatalf("populated %d bytes at %#x (%d ns a page)", Populated.Len, Populated.Start, Populated.PageNs)
	case Populated.Ended:
		// The heap's mapping ended within the span: up to its end.
		if Populated.Len >= Span {
			t.Fatalf("populated %d bytes, yet the mapping ended", Populated.Len)
		}
	case Populated.FaultNs >= dear*Populated.PageNs:
		if Populated.Len != Span {
			t.Fatalf("faults dear (%d against %d ns a page), yet %d bytes were made resident, not the span", Populated.FaultNs, Populated.PageNs, Populated.Len)
		}
	default:
		if Populated.Len != chunk {
			t.Fatalf("faults cheap (%d against %d ns a page), yet %d bytes were made resident, not the first chunk", Populated.FaultNs, Populated.PageNs, Populated.Len)
		}
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

// TestPopulateStopsAtTheMappingsEnd: a range that runs past the end of
// its mapping is made resident up to that end.
func TestPopulateStopsAtTheMappingsEnd(t *testing.T) {
	if !hasPopulate(t) {
		t.Skip("the kernel is older than 5.14: no MADV_POPULATE_WRITE")
	}
	page := uintptr(syscall.Getpagesize())
	// 8 pages mapped, then a hole of 16 (something else may be mapped
	// right after a mapping of ours).
	mem, err := syscall.Mmap(-1, 0, int(24*page), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	munmap := func(off, n uintptr) {
		if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, base+off, n, 0); errno != 0 {
			t.Fatalf("munmap: %v", errno)
		}
	}
	munmap(8*page, 16*page)
	defer munmap(0, 8*page)
	// 16 pages asked from the fourth: 4 are mapped; 4 (a half of a
	// half) are made resident, all of them.
	if n := populate(base+4*page, 16*page, page); n != 4*page {
		t.Fatalf("populated %d bytes, want %d", n, 4*page)
	}
	if n := populate(base+8*page, 16*page, page); n != 0 {
		t.Fatalf("past the mapping: populated %d bytes", n)
	}
}

// TestFirstTouch: a first touch is measured on a page that is mapped and
// not resident, and makes it resident with its content still zero; on a
// page past the mapping it measures nothing and touches nothing.
func TestFirstTouch(t *testing.T) {
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 4*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	unmap := func(off, n int) {
		if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, base+uintptr(off), uintptr(n), 0); errno != 0 {
			t.Fatalf("munmap: %v", errno)
		}
	}
	defer unmap(0, 2*page)
	resident := func() []byte {
		vec := make([]byte, 4)
		if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatalf("mincore: %v", errno)
		}
		return vec
	}
	mem[0] = 0 // resident: the touch goes to the next page
	if ns := firstTouch(base, uintptr(page)); ns <= 0 {
		t.Fatalf("first touch: %d ns", ns)
	}
	if vec := resident(); vec[1]&1 == 0 || vec[2]&1 != 0 {
		t.Fatalf("residency after the touch: %v, want the second page alone made resident", vec)
	}
	for i, b := range mem {
		if b != 0 {
			t.Fatalf("byte %d is %d after the touch", i, b)
		}
	}
	// Past the mapping: the first two pages resident, the rest unmapped.
	unmap(2*page, 2*page)
	if ns := firstTouch(base, uintptr(page)); ns != 0 {
		t.Fatalf("past the mapping: measured %d ns", ns)
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
