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
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	s := &sampler{w: w, seen: map[fileKey]bool{}, uid: os.Getuid()}
	for _, m := range w.Tmpfs {
		b, i := tmpfsUse(m)
		s.bytes += b
		s.inodes += i
	}
	for _, dir := range w.Dirs {
		s.walk(dir)
	}
	return s.bytes, s.inodes
}

type fileKey struct{ dev, ino uint64 }

type sampler struct {
	w             *Watch
	bytes, inodes int64
	seen          map[fileKey]bool // hard links count once
	uid           int
}

func (s *sampler) over() bool { return s.bytes > s.w.MaxBytes || s.inodes > s.w.MaxInodes }

func (s *sampler) walk(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if s.over() {
			return filepath.SkipAll
		}
		if err != nil {
			if d != nil && d.IsDir() && errors.Is(err, fs.ErrPermission) {
				s.unhide(p) // counted already; its entries were not
			}
			return nil // vanished or unreadable: counted as far as seen
		}
		if st := s.count(d); d.IsDir() && st != nil && s.hidden(st) {
			s.unhide(p)
			return filepath.SkipDir
		}
		return nil
	})
}

// count adds d (once per inode) and returns its stat (nil if it has
// none).
func (s *sampler) count(d fs.DirEntry) *syscall.Stat_t {
	fi, err := d.Info()
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Nlink > 1 && !d.IsDir() {
		k := fileKey{uint64(st.Dev), uint64(st.Ino)}
		if s.seen[k] {
			return st
		}
		s.seen[k] = true
	}
	s.inodes++
	s.bytes += int64(st.Blocks) * 512
	return st
}

// hidden reports a directory of this (non-root) user that it cannot
// list or search: its owner made it so, and only its owner can undo it.
func (s *sampler) hidden(st *syscall.Stat_t) bool {
	return s.uid != 0 && int(st.Uid) == s.uid && st.Mode&0o500 != 0o500
}

// unhide reads a directory that its owner, the sandbox's user (this
// one), made unreadable to hide what it holds from the walk: it is made
// readable for the time of the walk and its mode is put back. Root's
// walk reads every directory; another user's directory is left alone.
func (s *sampler) unhide(dir string) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != s.uid {
		return
	}
	mode := uint32(st.Mode) & 0o7777 // setgid and sticky bits too
	if syscall.Chmod(dir, mode|0o500) != nil {
		return
	}
	defer syscall.Chmod(dir, mode)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if s.over() {
			return
		}
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			s.walk(p) // counts p itself first
		} else {
			s.count(e)
		}
	}
}
