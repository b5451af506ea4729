//go:build !linux

package runner

import (
	"os/exec"
	"syscall"
)

// fionread asks how many bytes a pipe holds unread: FIONREAD, _IOR('f',
// 127, int) on macOS and the BSDs (golang.org/x/sys/unix does not name it
// there).
const fionread = 0x4004667f

// sysProcAttr puts the command in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

// groupAlive reports whether a process group has a member.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}
