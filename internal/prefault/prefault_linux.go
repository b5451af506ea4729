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
	// chunk is one call's share: a call that reaches past the heap's
	// mapping fails, and the range ends at the chunk before it.
	chunk = 256 << 10
)

// Populated is the range made resident at start; Len is 0 where the
// kernel has no MADV_POPULATE_WRITE.
var Populated struct{ Start, Len uintptr }

// anchor is a heap object: where the heap is.
var anchor *[64]byte

func init() {
	anchor = new([64]byte)
	start := uintptr(unsafe.Pointer(anchor)) &^ uintptr(syscall.Getpagesize()-1)
	Populated.Start = start
	for Populated.Len < Span {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start+Populated.Len, chunk, madvPopulateWrite); errno != 0 {
			break
		}
		Populated.Len += chunk
	}
}
