//go:build !linux

package supervisor

import (
	"errors"
	"syscall"
)

// procStart is not known without /proc: 0 and an error.
func procStart(pid int) (uint64, error) { return 0, errors.New("process start times need /proc") }

// signalProcess never signals where the process cannot be told from one
// that reused its PID: the supervisor sees the cancel request when it
// polls the record (cancelPoll).
func signalProcess(pid int, start uint64, sig syscall.Signal) (bool, error) { return false, nil }
