package seccomp

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Seccomp return values (linux/seccomp.h).
const (
	retKillProcess = 0x80000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on little-endian machines
	offArg1 = 24
)

// nsFlags are the clone flags that make namespaces; the sandbox may not
// make any (new user namespaces above all).
const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// deniedCommon are denied with EPERM on every architecture: what a coding
// agent never needs and what helps escape or attack the kernel.
var deniedCommon = []uintptr{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_SETNS, unix.SYS_UNSHARE,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_USERFAULTFD,
	unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_SYSLOG,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_VHANGUP,
	unix.SYS_PIDFD_GETFD, unix.SYS_FANOTIFY_INIT, unix.SYS_LOOKUP_DCOOKIE,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
}

// modeArg names the argument of a call that holds a file mode.
type modeArg struct {
	nr  uintptr
	arg int
}

// modeArgsCommon are the calls that set a file's mode, on every
// architecture, the commonest first; modeArgsArch adds the legacy ones of
// an architecture.
var modeArgsCommon = []modeArg{
	{unix.SYS_OPENAT, 3}, {unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_MKNODAT, 2},
}

// deniedIoctls inject input into a terminal.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// Program assembles the sandbox's seccomp filter: a foreign
// architecture kills the process; denied calls fail with EPERM; clone3
// fails with ENOSYS (so libcs fall back to clone, whose flags a classic
// filter can read); clone with namespace flags fails with EPERM; so does
// making a file setuid or setgid (chmod, open/mknod with such a mode).
func Program() ([]bpf.RawInstruction, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("no seccomp filter for this architecture")
	}
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: retKillProcess},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if x32Bit != 0 {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
			bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		)
	}
	// The calls whose arguments are read come first, openat first of all.
	// The kernel answers a call that the filter allows whatever its
	// arguments from a cache (Linux 5.11), without running the filter;
	// these run it on each call, and openat is among the commonest calls
	// there are: each instruction before its check is paid on each open.
	//
	// No setuid or setgid files: they would keep their bit on the host.
	for _, m := range append(slices.Clone(modeArgsCommon), modeArgsArch...) {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(m.nr), SkipFalse: 4},
			bpf.LoadAbsolute{Off: offArg0 + 8*uint32(m.arg), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.S_ISUID | unix.S_ISGID, SkipFalse: 1},
			bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
			bpf.RetConstant{Val: retAllow},
		)
	}
	// clone: flags are the first argument on every architecture here.
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_CLONE), SkipFalse: 4},
		bpf.LoadAbsolute{Off: offArg0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipFalse: 1},
		bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		bpf.RetConstant{Val: retAllow},
	)
	// ioctl: the request is the second argument.
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_IOCTL), SkipFalse: uint8(2 + 2*len(deniedIoctls))},
		bpf.LoadAbsolute{Off: offArg1, Size: 4},
	)
	for _, req := range deniedIoctls {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: req, SkipFalse: 1},
			bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		)
	}
	p = append(p, bpf.RetConstant{Val: retAllow})
	deny := func(nr uintptr, errno unix.Errno) {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: retErrno | uint32(errno)},
		)
	}
	for _, nr := range deniedCommon {
		deny(nr, unix.EPERM)
	}
	for _, nr := range deniedArch {
		deny(nr, unix.EPERM)
	}
	deny(unix.SYS_CLONE3, unix.ENOSYS)
	// openat2's mode is in a struct a classic filter cannot read.
	deny(unix.SYS_OPENAT2, unix.ENOSYS)
	p = append(p, bpf.RetConstant{Val: retAllow})
	return bpf.Assemble(p)
}

// Available reports whether a filter is written for this architecture.
func Available() bool { return auditArch != 0 }

// LoadAllThreads installs the filter on every thread of the process
// (SECCOMP_FILTER_FLAG_TSYNC; no_new_privs must be set). Children forked
// from any of them inherit it.
func LoadAllThreads() error {
	raw, err := Program()
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("load seccomp filter: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("load seccomp filter: thread %d could not be synchronized", r)
	}
	return nil
}
