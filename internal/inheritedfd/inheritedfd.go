//go:build unix

// Package inheritedfd closes the descriptors a process of the agentrun
// binary inherited without meaning to: those its starter left open
// without close-on-exec (a shell's, an editor's or a CI harness's pipes,
// a make jobserver, a connection to some agent's socket). Go starts a
// child with the descriptors it names and every inherited one that is
// not close-on-exec, so without this a detached supervisor would hold
// its submitter's pipes open for the run's life (a caller reading one
// to its end would wait for the run), and the sandbox's processes would
// get host pipes, sockets and files that no mount, Landlock rule or
// seccomp filter governs: those are reached through the descriptor, not
// a path.
//
// The runtime and the standard library open every descriptor
// close-on-exec, so one without it above stderr was inherited; only the
// descriptors a process is started with on purpose are kept (keep).
package inheritedfd

import (
	"os"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Close closes every descriptor of this process from 3 up that is not
// close-on-exec and that keep does not name, and returns those it
// closed. It holds the fork lock, under which the standard library makes
// a descriptor and then sets close-on-exec where the system cannot do
// both at once, so that no such descriptor is taken for an inherited one.
func Close(keep ...int) ([]int, error) {
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	d, err := os.Open(fdDir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var closed []int
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 || slices.Contains(keep, fd) {
			continue
		}
		// The directory's own descriptor is closed by now (EBADF), and
		// was close-on-exec.
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if unix.Close(fd) == nil {
			closed = append(closed, fd)
		}
	}
	return closed, nil
}
