package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/layout"
)

// The wait queue is a directory of entries "<seq>-<id>", one per run
// waiting for a slot. The spawner makes the entry while it holds the run's
// supervisor.lock (so the entry is never without a live owner), and the
// supervisor removes it once it has a slot or gives up. An entry whose
// run's lock is free belongs to a dead supervisor and is swept. Looking
// for older waiters costs a read of this directory, not of every run.

func queueDir(l layout.Layout) string { return filepath.Join(l.Home, "queue") }

func queueEntry(l layout.Layout, seq int64, id string) string {
	return filepath.Join(queueDir(l), fmt.Sprintf("%020d-%s", seq, id))
}

// enqueue records that run id (submission order seq) waits for a slot.
func enqueue(l layout.Layout, seq int64, id string) error {
	if err := os.MkdirAll(queueDir(l), 0o700); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	f, err := os.OpenFile(queueEntry(l, seq, id), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return f.Close()
}

// dequeue removes the run's entry (idempotent).
func dequeue(l layout.Layout, seq int64, id string) {
	if err := os.Remove(queueEntry(l, seq, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "supervise %s: dequeue: %v\n", id, err)
	}
}

// olderWaiting reports whether a run submitted before seq still waits for
// a slot with a live supervisor, so it must start first (FIFO).
func (s *Supervisor) olderWaiting(_ context.Context, seq int64) (bool, error) {
	ents, err := os.ReadDir(queueDir(s.Layout))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("queue: %w", err)
	}
	for _, e := range ents { // sorted by name: oldest first
		seqStr, id, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.ParseInt(seqStr, 10, 64)
		if !ok || err != nil {
			continue
		}
		if n >= seq {
			return false, nil
		}
		if id == s.ID {
			continue
		}
		held, err := Held(s.Layout.SupervisorLock(id))
		if err != nil {
			return false, err
		}
		if held {
			return true, nil
		}
		dequeue(s.Layout, n, id) // its supervisor died
	}
	return false, nil
}
