package prefault

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault a range in,
// writable, as writes would, without the faults.
const madvPopulateWrite = 23

const (
	// Span bounds the range made resident.
	Span = 4 << 20
	// chunk is one call's share (a power of two, as populate halves it).
	chunk = 256 << 10
	// dear is how many times a page made resident by madvise a fault
	// must cost for the rest of the span to be made resident: about
	// half of it is used before a short command ends, so below that the
	// pages nobody touches cost more than the faults saved.
	dear = 3
)

// Populated is the range made resident at start; Len is 0 where the
// kernel has no MADV_POPULATE_WRITE, and Ended says the heap's mapping
// ended before the span did. PageNs is what the first chunk cost a page,
// FaultNs what a first touch of the page after it cost (0 where it was
// not measured); the rest of the span was made resident only where
// FaultNs is at least dear times PageNs.
var Populated struct {
	Start, Len      uintptr
	Ended           bool
	PageNs, FaultNs int64
}

// anchor is a heap object: where the heap is.
var anchor *[64]byte

func init() {
	anchor = new([64]byte)
	page := uintptr(syscall.Getpagesize())
	start := uintptr(unsafe.Pointer(anchor)) &^ (page - 1)
	Populated.Start = start
	// The first chunk: the heap reaches it in any process. Its cost per
	// page is the measure of what the rest would cost.
	t0 := monotonic()
	n := populate(start, chunk, page)
	if n == 0 {
		return
	}
	Populated.PageNs = (monotonic() - t0) / int64(n/page)
	Populated.Len, Populated.Ended = n, n < chunk
	if Populated.Ended {
		return
	}
	Populated.FaultNs = firstTouch(start+chunk, page)
	if Populated.FaultNs < dear*Populated.PageNs {
		return // faults are cheap here: the heap takes them as it grows
	}
	for Populated.Len < Span && !Populated.Ended {
		n := populate(start+Populated.Len, chunk, page)
		Populated.Len, Populated.Ended = Populated.Len+n, n < chunk
	}
}

// populate makes n bytes at addr resident, or as many of them as come
// before the end of the heap's mapping (a call that reaches past it
// fails: halves are tried down to a page); it returns how many. 0 also
// on a kernel without MADV_POPULATE_WRITE.
func populate(addr, n, page uintptr) uintptr {
	for ; n >= page; n /= 2 {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, n, madvPopulateWrite); errno == 0 {
			return n
		}
	}
	return 0
}

// firstTouch times a first write to one page at or after addr that is
// mapped and not resident: a zero byte read from /dev/zero into it (the
// heap's free memory is zero, and stays so), which faults it in as a
// write from the process would, less the same read into a resident page
// (the system calls' own cost). 0 when no such page was found near addr
// or a read failed: not measured.
func firstTouch(addr, page uintptr) int64 {
	fd, err := syscall.Open("/dev/zero", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	read := func(p uintptr) int64 {
		t0 := monotonic()
		if n, _, errno := syscall.Syscall6(syscall.SYS_PREAD64, uintptr(fd), p, 1, 0, 0, 0); errno != 0 || n != 1 {
			return -1
		}
		return monotonic() - t0
	}
	base := read(uintptr(unsafe.Pointer(&anchor[0])))
	if base < 0 {
		return 0
	}
	for p := addr; p < addr+8*page; p += page {
		var vec byte
		if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, p, page, uintptr(unsafe.Pointer(&vec))); errno != 0 {
			return 0 // past the heap's mapping
		}
		if vec&1 != 0 {
			continue // resident already
		}
		if t := read(p); t > 0 {
			return max(t-base, 1)
		}
		return 0
	}
	return 0
}

// monotonic is CLOCK_MONOTONIC in ns (a system call: package time would
// move this package's initializer later).
func monotonic() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
