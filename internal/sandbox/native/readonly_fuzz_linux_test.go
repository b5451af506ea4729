package native

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadOnlyTarget: an accepted extra path is absolute and covers none
// of the sandbox's own mounts; one on /tmp lies under it (bound on the
// sandbox's own /tmp), never /tmp itself or above it.
func FuzzReadOnlyTarget(f *testing.F) {
	for _, s := range []string{"/usr/local/go", "/opt", "/", "/workspace/x", "/proc", "/a/../proc/1", "rel", "/tmp/../etc", "/.agentrun", "/home", "/tmp", "/tmp/x", "/tmp/../tmp/y/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkReadOnlyTarget(p) != nil {
			return
		}
		c := filepath.Clean(p)
		if !filepath.IsAbs(c) || c == "/" {
			t.Fatalf("accepted %q", p)
		}
		for _, r := range reservedTargets {
			if c == r.path || strings.HasPrefix(c, r.path+"/") || strings.HasPrefix(r.path, c+"/") {
				t.Fatalf("accepted %q overlapping %s", p, r.path)
			}
		}
		if c == "/tmp" || strings.HasPrefix("/tmp", c+"/") {
			t.Fatalf("accepted %q covering /tmp", p)
		}
	})
}
