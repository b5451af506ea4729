// Package diskwatch bounds what a sandbox holds on disk where no kernel
// bound covers the whole: it samples the host directories the sandbox can
// write (workspace, HOME) and its tmpfs mounts together, and kills the
// sandbox past the bound. The kernel bounds each tmpfs and each file on
// its own (size=, RLIMIT_FSIZE); this bounds their sum. It is a sample:
// between two samples a sandbox may pass the bound by what it writes in
// that time, and it counts only what it can read (the walk runs as the
// host user).
package diskwatch

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/sandbox"
)

const (
	// Interval is the shortest time between two samples; a walk that
	// takes longer than Interval/duty spaces the samples further (at most
	// a tenth of a core).
	Interval = time.Second
	duty     = 10
)

// Watch samples Dirs (host directories, walked) and Tmpfs (mount points
// seen from the host, counted by statfs when they are tmpfs) until Done
// is closed or the sum passes MaxBytes or MaxInodes.
type Watch struct {
	Dirs, Tmpfs         []string
	MaxBytes, MaxInodes int64
	// What names the places counted, for the error: "the workspace,
	// HOME and /tmp".
	What string
	Done <-chan struct{} // closed when the sandbox has ended

	mu  sync.Mutex
	err error
}

// Exceeded is nil, or why the sandbox was killed (wrapping
// sandbox.ErrDiskExceeded). A nil Watch is never exceeded.
func (w *Watch) Exceeded() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Run samples until the sandbox ends or passes the bound; then it calls
// kill and returns. A nil Watch returns at once.
func (w *Watch) Run(kill func()) {
	if w == nil {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-w.Done:
			return
		case <-t.C:
		}
		t0 := time.Now()
		bytes, inodes := w.Sample()
		if bytes > w.MaxBytes || inodes > w.MaxInodes {
			select {
			case <-w.Done:
				return // ended meanwhile: nothing to stop
			default:
			}
			w.mu.Lock()
			w.err = fmt.Errorf("%w: %s hold %s", sandbox.ErrDiskExceeded, w.What, describe(bytes, inodes, w.MaxBytes, w.MaxInodes))
			w.mu.Unlock()
			kill()
			return
		}
		t.Reset(max(Interval, duty*time.Since(t0)))
	}
}

func describe(bytes, inodes, maxBytes, maxInodes int64) string {
	if bytes > maxBytes {
		return fmt.Sprintf("more than %d bytes (the bound, --disk)", maxBytes)
	}
	return fmt.Sprintf("more than %d files and directories (the bound, --disk-inodes)", maxInodes)
}

// Sample counts blocks and inodes, stopping as soon as either passes the
// bound: a walk costs at most MaxInodes entries.
func (w *Watch) Sample() (bytes, inodes int64) {
	for _, m := range w.Tmpfs {
		b, i := tmpfsUse(m)
		bytes += b
		inodes += i
	}
	type key struct{ dev, ino uint64 }
	seen := map[key]bool{} // hard links count once
	for _, dir := range w.Dirs {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if bytes > w.MaxBytes || inodes > w.MaxInodes {
				return filepath.SkipAll
			}
			if err != nil || d == nil {
				return nil // vanished or unreadable: counted as far as seen
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			if st.Nlink > 1 && !d.IsDir() {
				k := key{uint64(st.Dev), uint64(st.Ino)}
				if seen[k] {
					return nil
				}
				seen[k] = true
			}
			inodes++
			bytes += int64(st.Blocks) * 512
			return nil
		})
	}
	return bytes, inodes
}
