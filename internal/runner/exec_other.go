//go:build !linux

package runner

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the command in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

// groupAlive reports whether a process group has a member.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}
