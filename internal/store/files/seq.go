package files

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// nextSeq takes the next submission number from the counter file under its
// flock. Numbers only grow, so the new value is written in place over the
// old one (it is never shorter) and fsynced. An empty or unreadable counter
// (a lost or damaged file) restarts above the highest Seq of any stored run,
// so order is never reused.
//
// The fsync runs from a goroutine, which holds the flock until it is done;
// synced waits for it and returns its error: the caller makes nothing that
// holds the number durable before it.
func (s *Store) nextSeq(ctx context.Context) (seq int64, synced func() error, err error) {
	f, err := lockFile(ctx, s.L.Seq(), os.O_RDWR)
	if err != nil {
		return 0, nil, fmt.Errorf("seq counter: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			f.Close()
		}
	}()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, nil, fmt.Errorf("read seq counter: %w", err)
	}
	cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || cur < 0 {
		cur = s.maxStoredSeq()
	}
	next := cur + 1
	out := []byte(strconv.FormatInt(next, 10) + "\n")
	if _, err := f.WriteAt(out, 0); err != nil {
		return 0, nil, fmt.Errorf("write seq counter: %w", err)
	}
	if err := f.Truncate(int64(len(out))); err != nil {
		return 0, nil, fmt.Errorf("write seq counter: %w", err)
	}
	done := make(chan error, 1)
	closed = true
	go func() {
		defer f.Close()
		done <- syncFile(f)
	}()
	return next, sync.OnceValue(func() error {
		if err := <-done; err != nil {
			return fmt.Errorf("fsync seq counter: %w", err)
		}
		return nil
	}), nil
}

// maxStoredSeq is the highest Seq among the readable runs (0 for none).
func (s *Store) maxStoredSeq() int64 {
	var max int64
	for _, id := range s.runIDs() {
		if r, err := s.read(id); err == nil && r.Seq > max {
			max = r.Seq
		}
	}
	return max
}
