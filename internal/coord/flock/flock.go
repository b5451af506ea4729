package flock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// pollHeld is how often Acquire tries a held lease again while it waits.
const pollHeld = 5 * time.Millisecond

// maxTokenLen bounds the counter kept in supervisor.lock: an int64 in
// decimal and a newline.
const maxTokenLen = 20

// Coordinator is coord.Coordinator (and coord.Handover) on flocks under one
// data directory. Coordinators made for the same home are interchangeable:
// a lease made by one is accepted by another.
type Coordinator struct{ l layout.Layout }

var (
	_ coord.Coordinator = (*Coordinator)(nil)
	_ coord.Handover    = (*Coordinator)(nil)
)

// New returns the coordinator of data directory home ($AGENTRUN_HOME). It
// creates nothing until it is used.
func New(home string) *Coordinator { return &Coordinator{l: layout.Layout{Home: home}} }

// lease holds runs/<id>/supervisor.lock through its open file f.
type lease struct {
	home  string
	id    string
	token int64

	mu sync.Mutex
	f  *os.File // nil once released
}

func (l *lease) RunID() string { return l.id }
func (l *lease) Token() int64  { return l.token }

// Release closes the lock file; the flock goes with the last open copy of
// it (a child that inherited it keeps it).
func (l *lease) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("release %s: %w", l.id, err)
	}
	return nil
}

// file is the lease's open lock file, or ErrReleased.
func (l *lease) file() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, fmt.Errorf("run %s: %w", l.id, coord.ErrReleased)
	}
	return l.f, nil
}

// own checks that cl is a live lease of this data directory.
func (c *Coordinator) own(cl coord.Lease) (*lease, error) {
	l, ok := cl.(*lease)
	if !ok || l == nil || l.home != c.l.Home {
		return nil, fmt.Errorf("a lease not made by the coordinator of %s", c.l.Home)
	}
	if _, err := l.file(); err != nil {
		return nil, err
	}
	return l, nil
}

// Acquire takes runs/<id>/supervisor.lock, polling every pollHeld until
// wait has passed, and then counts the fencing token kept in the file up.
func (c *Coordinator) Acquire(ctx context.Context, id string, wait time.Duration) (coord.Lease, error) {
	if err := run.ValidateID(id); err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	f, err := openLock(c.l.SupervisorLock(id))
	if err != nil {
		return nil, err
	}
	if err := lockWithin(ctx, f, wait); err != nil {
		f.Close()
		if errors.Is(err, coord.ErrHeld) {
			return nil, err
		}
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	token, err := nextToken(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &lease{home: c.l.Home, id: id, token: token, f: f}, nil
}

// lockWithin takes f's flock, trying again every pollHeld until wait has
// passed (ErrHeld) or ctx ends.
func lockWithin(ctx context.Context, f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var t *time.Timer
	for {
		ok, err := tryLock(f)
		if err != nil || ok {
			return err
		}
		if !time.Now().Before(deadline) {
			return coord.ErrHeld
		}
		if t == nil {
			t = time.NewTimer(pollHeld)
			defer t.Stop()
		} else {
			t.Reset(pollHeld)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Held probes runs/<id>/supervisor.lock without creating it.
func (c *Coordinator) Held(_ context.Context, id string) (bool, error) {
	if err := run.ValidateID(id); err != nil {
		return false, fmt.Errorf("held: %w", err)
	}
	return heldPath(c.l.SupervisorLock(id))
}

// readToken reads the counter at the start of the locked file f. An empty
// file (new, or made by a version that kept no counter) counts as 0.
func readToken(f *os.File) (int64, error) {
	var b [maxTokenLen + 1]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("read fencing token: %w", err)
	}
	s := strings.TrimSpace(string(b[:n]))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if n > maxTokenLen || err != nil || v < 0 {
		return 0, fmt.Errorf("%s holds no fencing token (%q): remove the file while no supervisor of the run lives", f.Name(), s)
	}
	return v, nil
}

// nextToken counts the token kept in the locked file f up by one and
// returns it. The new text is never shorter than the old, so a crash
// between the write and the truncate leaves a valid number; no fsync: after
// a crash no holder of an older token survives to use it.
func nextToken(f *os.File) (int64, error) {
	v, err := readToken(f)
	if err != nil {
		return 0, err
	}
	v++
	b := strconv.AppendInt(nil, v, 10)
	b = append(b, '\n')
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// A full disk must not keep a dead run from being marked
		// interrupted or removed (which frees the space). The token is not
		// recorded, so the run's next lease may repeat it; nothing fences
		// with it meanwhile: the run's record, on the same disk, cannot be
		// written either.
		return v, nil
	}
	if err != nil {
		return 0, fmt.Errorf("write fencing token: %w", err)
	}
	return v, nil
}

// File is the lease's open supervisor.lock, for a child's ExtraFiles.
func (c *Coordinator) File(cl coord.Lease) (*os.File, error) {
	l, err := c.own(cl)
	if err != nil {
		return nil, err
	}
	return l.file()
}

// Adopt checks that f is run id's supervisor.lock and holds its flock, and
// reads the token back from it.
func (c *Coordinator) Adopt(id string, f *os.File) (coord.Lease, error) {
	if err := run.ValidateID(id); err != nil {
		return nil, fmt.Errorf("adopt: %w", err)
	}
	if f == nil {
		return nil, fmt.Errorf("adopt %s: no file", id)
	}
	path := c.l.SupervisorLock(id)
	got, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", id, err)
	}
	want, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", id, err)
	}
	if !os.SameFile(got, want) {
		return nil, fmt.Errorf("adopt %s: the inherited file is not %s", id, path)
	}
	// On the open file that holds the lock this succeeds at once; if it
	// fails, the lock is someone else's.
	ok, err := tryLock(f)
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("adopt %s: the inherited file does not hold the lease: %w", id, coord.ErrHeld)
	}
	token, err := readToken(f)
	if err != nil {
		return nil, fmt.Errorf("adopt %s: %w", id, err)
	}
	return &lease{home: c.l.Home, id: id, token: token, f: f}, nil
}
