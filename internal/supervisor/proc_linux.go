package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procStart is the start time of process pid, field 22 of
// /proc/<pid>/stat (clock ticks since boot): with the PID it names one
// process, since the kernel reuses PIDs but not start times.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so the fields are counted from the last ')'; field 3 comes first.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// signalProcess sends sig to pid only if it is still the process that
// started at start (procStart). The process is pinned with a pidfd before
// its start time is read, so the PID cannot pass to another process
// between the check and the signal. sent is false when pid is another
// process, or none; start 0 (unknown) never signals.
func signalProcess(pid int, start uint64, sig syscall.Signal) (sent bool, err error) {
	if start == 0 || pid <= 1 {
		return false, nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	pinned := err == nil
	if pinned {
		defer unix.Close(fd)
	} else if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	got, err := procStart(pid)
	if err != nil || got != start {
		return false, nil // gone, or another process has the PID
	}
	if pinned {
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
	} else {
		err = syscall.Kill(pid, sig) // kernels before 5.3: a narrow window remains
	}
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
