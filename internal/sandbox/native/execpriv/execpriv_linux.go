package execpriv

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// Not in package syscall (x/sys/unix has them, but importing it would
// make this package one of the last initialized: the runtime initializes
// first the package with the smallest import path among those whose
// imports are, and golang.org/x/sys/unix comes after most of the binary).
const (
	prCapbsetRead        = 23 // PR_CAPBSET_READ
	prSetNoNewPrivs      = 38 // PR_SET_NO_NEW_PRIVS
	prCapAmbient         = 47 // PR_CAP_AMBIENT
	prCapAmbientClearAll = 4  // PR_CAP_AMBIENT_CLEAR_ALL
	clockMonotonic       = 1  // CLOCK_MONOTONIC
	// capSetfcap is the last capability every kernel this runs on has
	// (2.6.24+): a bounding set that ends before it means the drop loop
	// stopped for another reason than the end of the kernel's list.
	capSetfcap = 31
)

// Span is when the drop began and ended (CLOCK_MONOTONIC, ns), as the
// init's marks count time.
type Span struct{ Begin, End int64 }

var (
	done    bool
	span    Span
	dropErr error
)

func init() {
	if len(os.Args) > 2 && os.Args[1] == Entry && os.Args[2] == Role {
		drop()
	}
}

// Dropped returns when the drop ran and its error. In a process not
// started as the init (nothing dropped at package init) it drops now.
func Dropped() (Span, error) {
	if !done {
		drop()
	}
	return span, dropErr
}

func drop() {
	done = true
	span.Begin = Now()
	dropErr = dropAll()
	span.End = Now()
}

// dropAll empties the bounding set, then clears the ambient set and sets
// no_new_privs, each on every thread.
//
// The bounding set goes one capability at a time, and only those this
// thread still has: the threads there are now were all cloned from it
// since the exec, with its credentials, so theirs are the same. As root
// the host's thread that forks the init has emptied it already (see
// emptyBoundingSet in package native), and a host with a smaller set
// leaves fewer to drop. The kernel's list ends where it answers EINVAL
// (the same check as /proc/sys/kernel/cap_last_cap, without a file to
// read).
func dropAll() error {
	cp := 0
	for ; ; cp++ {
		has, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetRead, uintptr(cp), 0)
		if errno == syscall.EINVAL {
			break
		}
		if errno != 0 {
			return &dropError{"read capability " + strconv.Itoa(cp) + " of the bounding set", errno}
		}
		if has == 0 {
			continue
		}
		if err := allThreads(syscall.SYS_PRCTL, syscall.PR_CAPBSET_DROP, uintptr(cp), 0); err != nil {
			return &dropError{"drop capability " + strconv.Itoa(cp) + " from the bounding set", err}
		}
	}
	if cp <= capSetfcap {
		return &dropError{"read capability " + strconv.Itoa(cp) + " of the bounding set", errors.New("the kernel does not know it")}
	}
	if err := allThreads(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0); err != nil {
		return &dropError{"clear ambient capabilities", err}
	}
	if err := allThreads(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); err != nil {
		return &dropError{"set no_new_privs", err}
	}
	return nil
}

// allThreads makes one system call on every thread of the process.
func allThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3); errno != 0 {
		return errno
	}
	return nil
}

// dropError is a step of the drop that failed (package fmt is not
// imported, for the same reason as x/sys/unix). With cgo the runtime
// cannot make a call on every thread (it does not know the threads C
// made): the message then says how to build the binary.
type dropError struct {
	what string
	err  error
}

// CgoRefusal is what a call on every thread says when the binary uses
// cgo (the call is refused: ENOTSUP); the native backend's confinement
// says it in the same words, and its preflight recognises them.
const CgoRefusal = "this agentrun binary uses cgo, build it with CGO_ENABLED=0"

func (e *dropError) Error() string {
	msg := e.what + " on every thread: "
	if errors.Is(e.err, syscall.ENOTSUP) {
		msg += CgoRefusal + ": "
	}
	return msg + e.err.Error()
}

func (e *dropError) Unwrap() error { return e.err }

// Now is CLOCK_MONOTONIC in ns, as the init's marks count time (one clock
// for the host and every process inside).
func Now() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
