package testsupport_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// A filled tmpfs refuses one more byte, and is gone after the test.
func TestTmpfsFillDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	t.Run("inner", func(t *testing.T) {
		testsupport.Tmpfs(t, dir, "64k")
		testsupport.FillDisk(t, filepath.Join(dir, "filler"))
		err := os.WriteFile(filepath.Join(dir, "one-more"), []byte("x"), 0o600)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write on a full tmpfs: %v, want ENOSPC", err)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "filler")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tmpfs is still mounted: %v", err)
	}
}
