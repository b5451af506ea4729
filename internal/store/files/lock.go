package files

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile opens path with flag (never through a symlink, never blocking
// on a FIFO) and takes an exclusive flock on the new open
// file description. Closing the returned file releases the lock.
//
// If ctx ends while the lock is held elsewhere, lockFile returns ctx's error;
// the file is then closed (and the lock released) by a goroutine as soon as
// the lock is granted.
func lockFile(ctx context.Context, path string, flag int) (*os.File, error) {
	f, err := openNoFollow(path, flag|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	err = flock(f, unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if ctx.Done() == nil {
		if err := flock(f, unix.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return f, nil
	}
	got := make(chan error, 1)
	go func() { got <- flock(f, unix.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return f, nil
	case <-ctx.Done():
		go func() {
			<-got
			f.Close()
		}()
		return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
	}
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
