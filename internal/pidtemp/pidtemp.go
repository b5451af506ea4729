// Package pidtemp makes temporary directories named after the process
// that made them, and removes those of processes that have ended: what a
// process killed before its cleanup (kill -9, a lost host) left in the
// temporary directory goes with the next one that makes such a directory.
package pidtemp

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MkdirTemp makes a new directory prefix<pid>-* in the temporary
// directory, after removing (Sweep) those of prefix whose process has
// ended.
func MkdirTemp(prefix string) (string, error) {
	Sweep(prefix)
	return os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
}

// Sweep removes the directories prefix<pid>-* in the temporary directory
// whose process pid has ended. One without a pid (named before this
// naming) goes once a day old.
func Sweep(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, d := range dirs {
		pid, _, named := strings.Cut(strings.TrimPrefix(filepath.Base(d), prefix), "-")
		n, err := strconv.Atoi(pid)
		switch {
		case named && err == nil && n > 0:
			if !ended(n) {
				continue // alive (or not ours to signal)
			}
		default:
			if fi, err := os.Stat(d); err != nil || time.Since(fi.ModTime()) < 24*time.Hour {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

// ended reports a process that is gone, or a zombie: killed, but not yet
// reaped by a parent (an init in a container may be slow to reap).
func ended(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || zombie(pid)
}
