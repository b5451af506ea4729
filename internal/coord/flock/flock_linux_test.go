package flock_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestAcquireOnFullDisk: a lease is granted on a full disk (a dead run's
// supervisor.lock must still be taken to mark it interrupted or remove
// it), with a token although it cannot be recorded.
func TestAcquireOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	testsupport.Tmpfs(t, dir, "1m")
	c := flock.New(dir)
	id := run.NewID()
	if err := os.MkdirAll(filepath.Join(dir, "runs", id), 0o755); err != nil {
		t.Fatal(err)
	}
	testsupport.FillDisk(t, filepath.Join(dir, "fill"))
	l, err := c.Acquire(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("acquire on a full disk: %v", err)
	}
	if l.Token() < 1 {
		t.Fatalf("token %d", l.Token())
	}
	if held, _ := c.Held(context.Background(), id); !held {
		t.Fatal("the lease taken on a full disk is not held")
	}
	l.Release()
}
