//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	x32Bit    = 0
)

var deniedArch = []uintptr{unix.SYS_NFSSERVCTL}

var modeArgsArch []modeArg
