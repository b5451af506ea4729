package files_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
)

// While another holder keeps run.lock, Update and Transition wait; a
// context that ends first gives up with its error and leaves the run as it
// was, and the lock is free for later callers.
func TestUpdateWaitsForTheRunLockAndHonoursContext(t *testing.T) {
	s := openStore(t)
	r := mustCreate(t, s, run.NewID())
	f, err := os.OpenFile(s.L.RunLock(r.ID), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = s.Update(short, r.ID, func(c *run.Run) error { c.Message = "too late"; return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Update under a held lock = %v, want DeadlineExceeded", err)
	}
	_, err = s.Transition(short, r.ID, []run.State{run.StateQueued}, run.StateRunning, "", "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Transition under a held lock = %v, want DeadlineExceeded", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := s.Update(context.Background(), r.ID, func(c *run.Run) error { c.Message = "waited"; return nil })
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Update finished while the lock was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.Close() // releases the flock
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, r.ID)
	if got.Message != "waited" || got.Version != 2 || got.State != run.StateQueued {
		t.Fatalf("after the lock was released: %+v", got)
	}
	// The abandoned waiters released the lock when they got it.
	quick, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := s.Update(quick, r.ID, func(*run.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
}
