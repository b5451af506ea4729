package native

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadOnlyTarget: an accepted extra path is absolute and covers none
// of the sandbox's own mounts.
func FuzzReadOnlyTarget(f *testing.F) {
	for _, s := range []string{"/usr/local/go", "/opt", "/", "/workspace/x", "/proc", "/a/../proc/1", "rel", "/tmp/../etc", "/.agentrun", "/home"} {
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
			if c == r || strings.HasPrefix(c, r+"/") || strings.HasPrefix(r, c+"/") {
				t.Fatalf("accepted %q overlapping %s", p, r)
			}
		}
	})
}
