package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestOverlayProgress: nothing for a state directory with no overlay;
// the layer being made while the workspace is made on a new commit; the
// cached layer's file count once it is made, and for a second workspace
// on the same commit at once.
func TestOverlayProgress(t *testing.T) {
	t.Parallel()
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "c.txt": "c\n"})
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	root := t.TempDir()
	state := filepath.Join(root, "state0")
	if got := c.OverlayProgress(state, base); got != "" {
		t.Fatalf("no workspace: %q", got)
	}
	// What Create has written before it makes the layer.
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, repoName), []byte(repo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := c.OverlayProgress(state, base); got != "an overlay: making the base commit's shared layer" {
		t.Fatalf("making: %q", got)
	}
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	if _, err := overlayAt(t, c, repo, base, root, 0); err != nil {
		t.Fatal(err)
	}
	const want = "an overlay on the cached layer of 3 files"
	if got := c.OverlayProgress(state, base); got != want {
		t.Fatalf("made: %q", got)
	}
	next := filepath.Join(root, "state1")
	if err := os.MkdirAll(next, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(next, repoName), []byte(repo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := c.OverlayProgress(next, base); got != want {
		t.Fatalf("a second workspace on the cached commit: %q", got)
	}
	// A plain checkout's state directory holds no overlay.
	ws := filepath.Join(root, "copy")
	if _, err := NewCheckout().Create(t.Context(), repo, base, ws, filepath.Join(root, "copy-state")); err != nil {
		t.Fatal(err)
	}
	if got := c.OverlayProgress(filepath.Join(root, "copy-state"), base); got != "" {
		t.Fatalf("a copy: %q", got)
	}
}
