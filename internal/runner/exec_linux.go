package runner

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

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
	want := []byte(strconv.Itoa(pgid))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 {
			continue
		}
		if bytes.Equal(f[2], want) && f[0][0] != 'Z' {
			return true
		}
	}
	return false
}
