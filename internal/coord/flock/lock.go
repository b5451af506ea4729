package flock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openLock opens (creating) a lock file, and its directory if missing.
func openLock(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	return f, nil
}

// tryLock takes an exclusive flock without waiting. ok is false when
// another open file holds it. On the open file that already holds it, it
// succeeds (flock converts the lock in place).
func tryLock(f *os.File) (ok bool, err error) {
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("flock %s: %w", f.Name(), err)
		}
		return true, nil
	}
}

// lock takes an exclusive flock, waiting for it.
func lock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
		return nil
	}
}

// tryLockPath opens path and tries its lock. On success the caller owns f
// (closing it releases the lock); otherwise f is nil.
func tryLockPath(path string) (*os.File, error) {
	f, err := openLock(path)
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		f.Close()
		return nil, err
	}
	return f, nil
}

// heldPath reports whether some live open file holds the lock at path (a
// missing file counts as not held). When nobody holds it, the probe holds
// it for an instant.
func heldPath(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open lock: %w", err)
	}
	defer f.Close()
	ok, err := tryLock(f)
	if err != nil {
		return false, err
	}
	return !ok, nil
}
