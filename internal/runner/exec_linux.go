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
	for _, n := range names {
		if state, _, pgrp, ok := procStat(n); ok && pgrp == pgid && state != 'Z' {
			return true
		}
	}
	return false
}

// procStat reads the state, parent and process group of /proc/<pid>/stat.
// ok is false for an entry that is not a live pid's readable stat.
func procStat(pid string) (state byte, ppid, pgrp int, ok bool) {
	st, ok := readProcStat(pid)
	return st.state, st.ppid, st.pgrp, ok
}

// procStatInfo is what the runner reads of /proc/<pid>/stat. start (clock
// ticks after boot) tells a pid from a later process that reused it.
type procStatInfo struct {
	state      byte
	ppid, pgrp int
	start      uint64
}

func readProcStat(pid string) (procStatInfo, bool) {
	if pid == "" || pid[0] < '0' || pid[0] > '9' {
		return procStatInfo{}, false
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStatInfo{}, false
	}
	// pid (comm) state ppid pgrp ... starttime (field 22) ...; comm may
	// hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStatInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStatInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStatInfo{}, false
	}
	return procStatInfo{state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, true
}
