package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// readOnlyScript runs the program of the read-only directory %[1]s,
// reads its file, tries to change it and to add one beside it, and
// writes %[2]s on the sandbox's own /tmp.
const readOnlyScript = `%[1]s/tool
cat %[1]s/data.txt
if (echo changed > %[1]s/data.txt) 2>/dev/null; then echo changed; else echo refused; fi
if (true > %[1]s/new) 2>/dev/null; then echo added; else echo refused; fi
echo own > %[2]s && cat %[2]s`

// runReadOnlyUnderTmp: a host directory under /tmp named read-only (an
// agent CLI installed there, --ro) is shown at its own path on the
// sandbox's /tmp, which stays the sandbox's own: the directory's program
// runs and its file reads, nothing in it changes, and /tmp beside it is
// writable and not the host's. /tmp itself is refused before a start.
func runReadOnlyUnderTmp(t *testing.T, b sandbox.Backend, adjust func(*sandbox.Spec)) {
	dir := testsupport.SearchableDir(t, "/tmp", "sbt-ro-")
	must(t, os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\necho tool ran\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "data.txt"), []byte("data\n"), 0o644))
	if c, ok := b.(sandbox.ReadOnlyChecker); ok {
		if err := c.CheckReadOnly(dir); err != nil {
			t.Fatalf("%s refuses %s: %v", b.Name(), dir, err)
		}
		if err := c.CheckReadOnly("/tmp"); err == nil {
			t.Errorf("%s accepts /tmp itself as a read-only path", b.Name())
		}
	}
	own := dir + "-own"
	e := startEnv(t, b, func(s *sandbox.Spec) {
		if adjust != nil {
			adjust(s)
		}
		s.ReadOnlyPaths = append(s.ReadOnlyPaths, dir)
	})
	defer e.sb.Destroy(context.Background())
	got, res := execBash(t, e, b.Name(), fmt.Sprintf(readOnlyScript, dir, own))
	if want := "tool ran\ndata\nrefused\nrefused\nown"; got != want {
		t.Errorf("%s: got %q, want %q (exit %d, stderr %q)", b.Name(), got, want, res.ExitCode, res.Stderr)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "data.txt")); err != nil || string(data) != "data\n" {
		t.Errorf("%s: the host's file is now %q (%v)", b.Name(), data, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "new")); err == nil {
		t.Errorf("%s: a file was added to the host's read-only directory", b.Name())
	}
	if _, err := os.Lstat(own); err == nil {
		os.Remove(own)
		t.Errorf("%s: the sandbox's /tmp is the host's: %s was written there", b.Name(), own)
	}
}
