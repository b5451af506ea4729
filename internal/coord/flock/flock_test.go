package flock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/coord/coordtest"
	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/run"
)

var ctx = context.Background()

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coord.Coordinator { return flock.New(t.TempDir()) })
}

func BenchmarkCoordinator(b *testing.B) {
	coordtest.Bench(b, func(b *testing.B) coord.Coordinator { return flock.New(b.TempDir()) })
}

func acquire(t *testing.T, c *flock.Coordinator, id string) coord.Lease {
	t.Helper()
	l, err := c.Acquire(ctx, id, 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire %s: %v", id, err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return l
}

func held(t *testing.T, c *flock.Coordinator, id string) bool {
	t.Helper()
	h, err := c.Held(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestFiles pins the files and their names: data directories made before
// the coordinator existed, and other versions sharing one, use the same.
func TestFiles(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	id := run.NewID()
	if held(t, c, id) {
		t.Fatal("held before anything")
	}
	if _, err := os.Stat(filepath.Join(home, "runs")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Held made files: %v", err)
	}
	l := acquire(t, c, id)
	lockPath := filepath.Join(home, "runs", id, "supervisor.lock")
	if b, err := os.ReadFile(lockPath); err != nil || string(b) != "1\n" {
		t.Fatalf("supervisor.lock holds %q, %v; want the token 1", b, err)
	}
	if m := mode(t, lockPath); m != 0o600 {
		t.Fatalf("supervisor.lock mode %v", m)
	}
	if err := c.Enqueue(ctx, l, 42); err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(home, "queue", "00000000000000000042-"+id)
	if m := mode(t, entry); m != 0o600 {
		t.Fatalf("queue entry mode %v", m)
	}
	if m := mode(t, filepath.Join(home, "queue")); m&0o077 != 0 {
		t.Fatalf("queue dir mode %v: want it private", m)
	}
	s, err := c.TrySlot(ctx, l, 42, 3, nil)
	if err != nil || s == nil {
		t.Fatalf("TrySlot: %v, %v", s, err)
	}
	defer s.Release()
	for _, p := range []string{"queue.lock", "slots/0.lock"} {
		if m := mode(t, filepath.Join(home, p)); m != 0o600 {
			t.Fatalf("%s mode %v", p, m)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "slots", "1.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("slot 1 looked at although slot 0 was free: %v", err)
	}
	if err := c.Dequeue(ctx, id, 42); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("entry left after Dequeue: %v", err)
	}
}

// rawLock holds path's flock the way versions before the coordinator did:
// an open file, nothing written.
func rawLock(t *testing.T, path string) *os.File {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestOlderFiles: locks and entries made by a version without the
// coordinator count as they did there.
func TestOlderFiles(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	oldRun, id := run.NewID(), run.NewID()
	old := rawLock(t, filepath.Join(home, "runs", oldRun, "supervisor.lock"))
	if err := os.MkdirAll(filepath.Join(home, "queue"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "queue", "00000000000000000001-"+oldRun), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !held(t, c, oldRun) {
		t.Fatal("a lock held by an older supervisor is not held")
	}
	if _, err := c.Acquire(ctx, oldRun, 0); !errors.Is(err, coord.ErrHeld) {
		t.Fatalf("Acquire of a run an older supervisor holds: %v", err)
	}
	l := acquire(t, c, id)
	if s, err := c.TrySlot(ctx, l, 2, 2, nil); err != nil || s != nil {
		t.Fatalf("TrySlot behind an older supervisor's entry: %v, %v; want none", s, err)
	}
	old.Close()
	s, err := c.TrySlot(ctx, l, 2, 2, nil)
	if err != nil || s == nil {
		t.Fatalf("TrySlot once the older supervisor is gone: %v, %v", s, err)
	}
	s.Release()
	// Its empty lock file counts as token 0.
	if l := acquire(t, c, oldRun); l.Token() != 1 {
		t.Fatalf("token %d after an older version's empty lock file; want 1", l.Token())
	}
	// A slot held by an older supervisor is taken.
	rawLock(t, filepath.Join(home, "slots", "0.lock"))
	if s, err := c.TrySlot(ctx, l, 2, 1, nil); err != nil || s != nil {
		t.Fatalf("TrySlot with the one slot held by an older supervisor: %v, %v; want none", s, err)
	}
}

func TestStrayQueueNames(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	q := filepath.Join(home, "queue")
	if err := os.MkdirAll(q, 0o700); err != nil {
		t.Fatal(err)
	}
	stray := []string{"junk", "00000000000000000001-NOT-AN-ID", "x-" + run.NewID(), ".00000000000000000001-" + run.NewID()}
	for _, n := range stray {
		if err := os.WriteFile(filepath.Join(q, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l := acquire(t, c, run.NewID())
	s, err := c.TrySlot(ctx, l, 5, 1, nil)
	if err != nil || s == nil {
		t.Fatalf("TrySlot beside stray names: %v, %v", s, err)
	}
	s.Release()
	for _, n := range stray {
		if _, err := os.Stat(filepath.Join(q, n)); err != nil {
			t.Fatalf("stray name %q touched: %v", n, err)
		}
	}
}

func TestTokenAcrossCoordinators(t *testing.T) {
	home := t.TempDir()
	a, b := flock.New(home), flock.New(home)
	id := run.NewID()
	for want := int64(1); want <= 4; want++ {
		c := a
		if want%2 == 0 {
			c = b
		}
		l := acquire(t, c, id)
		if l.Token() != want {
			t.Fatalf("token %d; want %d", l.Token(), want)
		}
		l.Release()
	}
	// A lease of one is good for the other, not for another home.
	l := acquire(t, a, id)
	if err := b.Enqueue(ctx, l, 1); err != nil {
		t.Fatalf("Enqueue on another coordinator of the same home: %v", err)
	}
	if err := flock.New(t.TempDir()).Enqueue(ctx, l, 1); err == nil {
		t.Fatal("Enqueue took a lease of another home")
	}
}

func TestDamagedToken(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	id := run.NewID()
	p := filepath.Join(home, "runs", id, "supervisor.lock")
	for _, bad := range []string{"x\n", "-4\n", "99999999999999999999999\n"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := c.Acquire(ctx, id, 0)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("Acquire with %q in the lock file: %v, %v; want an error naming it", bad, l, err)
		}
		if held(t, c, id) {
			t.Fatal("a failed Acquire left the lease held")
		}
	}
	if err := os.WriteFile(p, []byte("41"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := acquire(t, c, id); l.Token() != 42 {
		t.Fatalf("token %d after 41; want 42", l.Token())
	}
}

func TestBadIDs(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	for _, id := range []string{"", "../../etc", "ABCDEFGHIJKL", strings.Repeat("a", 40)} {
		if _, err := c.Acquire(ctx, id, 0); !errors.Is(err, run.ErrBadID) {
			t.Errorf("Acquire %q: %v", id, err)
		}
		if _, err := c.Held(ctx, id); !errors.Is(err, run.ErrBadID) {
			t.Errorf("Held %q: %v", id, err)
		}
		if err := c.Dequeue(ctx, id, 1); !errors.Is(err, run.ErrBadID) {
			t.Errorf("Dequeue %q: %v", id, err)
		}
		if _, err := c.Adopt(id, os.Stdin); !errors.Is(err, run.ErrBadID) {
			t.Errorf("Adopt %q: %v", id, err)
		}
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("bad ids made files: %v", ents)
	}
}

func TestAdoptChecksTheFile(t *testing.T) {
	home := t.TempDir()
	c := flock.New(home)
	id, other := run.NewID(), run.NewID()
	l := acquire(t, c, id)
	ol := acquire(t, c, other)
	of, err := c.File(ol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Adopt(id, of); err == nil {
		t.Fatal("Adopt took another run's lock file")
	}
	// The right file, but not the open file that holds the lock.
	f, err := os.OpenFile(filepath.Join(home, "runs", id, "supervisor.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := c.Adopt(id, f); !errors.Is(err, coord.ErrHeld) {
		t.Fatalf("Adopt of a file that does not hold the lock: %v; want ErrHeld", err)
	}
	l.Release()
	if _, err := c.File(l); !errors.Is(err, coord.ErrReleased) {
		t.Fatalf("File of a released lease: %v; want ErrReleased", err)
	}
}
