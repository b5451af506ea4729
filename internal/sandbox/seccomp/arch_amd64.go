//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	// x32Bit marks the x32 ABI's syscall numbers; they are all denied.
	x32Bit = 0x40000000
)

var deniedArch = []uintptr{
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB, unix.SYS_CREATE_MODULE,
	unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE, unix.SYS_NFSSERVCTL, unix.SYS_SYSFS,
	unix.SYS_USTAT, unix.SYS__SYSCTL,
}

var modeArgsArch = []modeArg{
	{unix.SYS_CHMOD, 1}, {unix.SYS_CREAT, 1}, {unix.SYS_OPEN, 2}, {unix.SYS_MKNOD, 1},
}
