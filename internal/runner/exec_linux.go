package runner

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
	"golang.org/x/sys/unix"
)

// fionread asks how many bytes a pipe holds unread (FIONREAD).
const fionread = unix.TIOCINQ

// sysProcAttr puts the command in its own process group and has the kernel
// kill it when the runner dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startCmd starts cmd. (Pdeathsig fires when the forking thread exits; the
// runtime retires threads only under goroutines that exit while locked to
// them, which the runner never does.)
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

// groupAlive reports whether a process group has a member that is not a
// zombie (zombies wait for their reaper and hold nothing open).
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, n := range names {
		if st, ok := deathwatch.ReadStat(n); ok && st.Pgrp == pgid && st.State != 'Z' {
			return true
		}
	}
	return false
}
