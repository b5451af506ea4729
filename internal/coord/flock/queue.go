package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
)

// The wait queue is a directory of entries "<seq>-<id>", one per run
// waiting for a slot, the seq zero-padded so that names sort by it. An
// entry is made while its run's lease is held (so it never starts without
// a live owner) and removed once the run has a slot or gives up; an entry
// whose run's lease is free belongs to a dead supervisor and is swept.
// Looking for older waiters costs a read of this directory, not of every
// run.

// queueDir is $AGENTRUN_HOME/queue (internal/layout has no name for it).
func (c *Coordinator) queueDir() string { return c.l.Queue() }

func (c *Coordinator) queueEntry(seq int64, id string) string {
	return filepath.Join(c.queueDir(), fmt.Sprintf("%020d-%s", seq, id))
}

// lockQueue takes queue.lock, which serialises every look at the queue and
// the slots. Closing the file releases it.
func (c *Coordinator) lockQueue() (*os.File, error) {
	q, err := openLock(c.l.QueueLock())
	if err != nil {
		return nil, err
	}
	if err := lock(q); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

// Enqueue makes the run's entry under queue.lock: a sweep, which holds it
// from probing an entry's lease to removing the entry, then cannot remove
// an entry made again for the same run and seq (a resumed run) between
// the two.
func (c *Coordinator) Enqueue(_ context.Context, cl coord.Lease, seq int64) error {
	l, err := c.own(cl)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if seq < 0 {
		return fmt.Errorf("enqueue %s: negative seq %d", l.id, seq)
	}
	q, err := c.lockQueue()
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", l.id, err)
	}
	defer q.Close()
	if err := os.MkdirAll(c.queueDir(), 0o700); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	f, err := os.OpenFile(c.queueEntry(seq, l.id), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return f.Close()
}

// Dequeue removes the run's entry, if there is one.
func (c *Coordinator) Dequeue(_ context.Context, id string, seq int64) error {
	if err := run.ValidateID(id); err != nil {
		return fmt.Errorf("dequeue: %w", err)
	}
	if err := os.Remove(c.queueEntry(seq, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dequeue: %w", err)
	}
	return nil
}

// TrySlot works under queue.lock: admit, then the first free slot among
// slots/0..n-1, then the FIFO check (only once a slot is free, so that a
// full machine does not read the queue on every poll).
func (c *Coordinator) TrySlot(ctx context.Context, cl coord.Lease, seq int64, n int, admit func(context.Context) error) (coord.Slot, error) {
	l, err := c.own(cl)
	if err != nil {
		return nil, fmt.Errorf("slot: %w", err)
	}
	q, err := c.lockQueue()
	if err != nil {
		return nil, fmt.Errorf("slot: %w", err)
	}
	defer q.Close()
	if admit != nil {
		if err := admit(ctx); err != nil {
			return nil, err
		}
	}
	var f *os.File
	for k := range max(n, 1) {
		if f, err = tryLockPath(c.l.SlotLock(k)); err != nil {
			return nil, fmt.Errorf("slot: %w", err)
		}
		if f != nil {
			break
		}
	}
	if f == nil {
		return nil, nil
	}
	older, err := c.olderWaiting(l.id, seq)
	if err != nil || older {
		f.Close()
		return nil, err
	}
	return &slot{f: f}, nil
}

// olderWaiting reports whether a run other than id, submitted before seq,
// still waits for a slot with a live lease, so it must start first. It
// sweeps the entries of dead holders that it meets. The caller holds
// queue.lock.
func (c *Coordinator) olderWaiting(id string, seq int64) (bool, error) {
	ents, err := os.ReadDir(c.queueDir())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("queue: %w", err)
	}
	for _, e := range ents { // sorted by name: oldest first
		seqStr, other, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.ParseInt(seqStr, 10, 64)
		if !ok || err != nil || run.ValidateID(other) != nil {
			continue // not an entry: never turned into a path
		}
		if n >= seq {
			return false, nil
		}
		if other == id {
			continue
		}
		held, err := heldPath(c.l.SupervisorLock(other))
		if err != nil {
			return false, fmt.Errorf("queue: %w", err)
		}
		if held {
			return true, nil
		}
		// Its supervisor died. An entry that cannot be removed now only
		// costs the next caller another probe: it never blocks anyone.
		_ = os.Remove(filepath.Join(c.queueDir(), e.Name()))
	}
	return false, nil
}

// slot holds slots/<k>.lock through its open file.
type slot struct {
	mu sync.Mutex
	f  *os.File // nil once released
}

func (s *slot) Release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("release slot: %w", err)
	}
	return nil
}
