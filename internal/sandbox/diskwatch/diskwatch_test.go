package diskwatch

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sandbox"
)

func write(t *testing.T, p string, n int) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) | 1 // not a hole
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Sample counts every directory's files, a hard link once, and stops
// walking once past the bound.
func TestSample(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write(t, filepath.Join(a, "one"), 1<<20)
	if err := os.Link(filepath.Join(a, "one"), filepath.Join(a, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(b, "two"), 1<<20)
	w := &Watch{Dirs: []string{a, b}, MaxBytes: 1 << 30, MaxInodes: 1000}
	bytes, inodes := w.Sample()
	if bytes < 2<<20 || bytes > 3<<20 {
		t.Errorf("bytes = %d, want about 2 MiB (the link once)", bytes)
	}
	if inodes != 4 { // two dirs, two files
		t.Errorf("inodes = %d, want 4", inodes)
	}
	for i := range 50 {
		write(t, filepath.Join(b, strconv.Itoa(i)), 10)
	}
	w.MaxInodes = 10
	if _, inodes := w.Sample(); inodes > 12 {
		t.Errorf("the walk went on past the bound: %d entries", inodes)
	}
}

// Run kills once past the bound, says why, and never after Done.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "big"), 2<<20)
	done := make(chan struct{})
	killed := make(chan struct{})
	w := &Watch{Dirs: []string{dir}, MaxBytes: 1 << 20, MaxInodes: 100, What: "the workspace", Done: done}
	go w.Run(func() { close(killed) })
	select {
	case <-killed:
	case <-time.After(5 * time.Second):
		t.Fatal("not killed past the bound")
	}
	if err := w.Exceeded(); !errors.Is(err, sandbox.ErrDiskExceeded) {
		t.Fatalf("Exceeded = %v", err)
	}
	close(done)
	var nilWatch *Watch
	nilWatch.Run(func() { t.Error("a nil watch killed") })
	if nilWatch.Exceeded() != nil {
		t.Error("a nil watch is exceeded")
	}
}

// A directory its owner made unreadable is counted all the same, and
// keeps its mode.
func TestSampleHiddenDirs(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "h", "d")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		write(t, filepath.Join(d, strconv.Itoa(i)), 1<<20)
	}
	if err := os.Chmod(d, os.ModeSticky); err != nil { // sticky, nothing else
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(d), 0o100); err != nil { // search only
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(d, 0o755); os.Chmod(filepath.Dir(d), 0o755) })
	w := &Watch{Dirs: []string{root}, MaxBytes: 1 << 30, MaxInodes: 1000}
	bytes, inodes := w.Sample()
	if bytes < 3<<20 || inodes != 6 {
		t.Errorf("sampled %d bytes, %d inodes; want 3 MiB, 6 (root, h, d, three files)", bytes, inodes)
	}
	for p, want := range map[string]os.FileMode{d: 0 | os.ModeSticky, filepath.Dir(d): 0o100} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSticky); got != want {
			t.Errorf("%s: mode %v after the walk, want %v", p, got, want)
		}
	}
}
