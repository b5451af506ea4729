package workspace

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// A layer copy is the workspace's own: made from the cached layer (made
// by the first Create, used as it is by the second), no file linked to
// the layer's, modes and symbolic links kept, a working git repository at
// the commit, no ref taken on the layer; what the agent changes shows in
// the scan and leaves the layer as it was.
func TestLayerCopy(t *testing.T) {
	t.Parallel()
	p, c, repo, base, root := firstLayerCopy(t)
	ctx := context.Background()
	l := c.layer(layerKey(base))
	made, err := readLayerInfo(l)
	if err != nil {
		t.Fatalf("the first copy made no layer: %v", err)
	}
	dir := filepath.Join(root, "ws2")
	ws, err := p.Create(ctx, repo, base, dir, filepath.Join(root, "state2"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := readLayerInfo(l); err != nil || !again.Made.Equal(made.Made) {
		t.Fatalf("the second copy made the layer again: %v %v", again, err)
	}
	for _, rel := range []string{"README.md", "src/main.go", "scripts/run.sh", ".git/index", ".git/HEAD"} {
		var a, b syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, rel), &a); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Lstat(filepath.Join(l.tree(), rel), &b); err != nil {
			t.Fatal(err)
		}
		if a.Ino == b.Ino || a.Nlink != 1 || a.Mode != b.Mode {
			t.Errorf("%s: inode %d (layer %d), links %d, mode %o (layer %o)", rel, a.Ino, b.Ino, a.Nlink, a.Mode, b.Mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "readme-link")); err != nil || target != "README.md" {
		t.Errorf("readme-link: %q %v", target, err)
	}
	if head := testsupport.Git(t, dir, "rev-parse", "HEAD"); head != base {
		t.Errorf("HEAD %s, want %s", head, base)
	}
	if st := testsupport.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status in the copy: %q", st)
	}
	if refs, _ := os.ReadDir(filepath.Join(l.dir, layerRefs)); len(refs) != 0 {
		t.Errorf("the copy took a ref on the layer: %v", refs)
	}
	if cs := scanWS(t, ws, Limits{}); len(cs.Changes) != 0 {
		t.Fatalf("changes in a fresh copy: %v", kinds(cs))
	}
	writeFile(t, filepath.Join(dir, "README.md"), "changed\n", 0o644)
	if got := kinds(scanWS(t, ws, Limits{})); len(got) != 1 || got["README.md"] == "" {
		t.Fatalf("changes: %v", got)
	}
	if b, err := os.ReadFile(filepath.Join(l.tree(), "README.md")); err != nil || string(b) != "# project\n\nline two\n" {
		t.Fatalf("the layer's README.md: %q %v", b, err)
	}
	// Open reads the copy's manifest as the checkout's does.
	if ws2, err := p.Open(ctx, dir, filepath.Join(root, "state2")); err != nil || len(scanWS(t, ws2, Limits{}).Changes) != 1 {
		t.Fatalf("open: %v", err)
	}
}

// A layer holding what a checkout never makes (a named pipe) fails the
// copy, and Create leaves no workspace behind.
func TestLayerCopyRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	p, c, repo, base, root := firstLayerCopy(t)
	ctx := context.Background()
	if err := syscall.Mkfifo(filepath.Join(c.layer(layerKey(base)).tree(), "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "ws2")
	if _, err := p.Create(ctx, repo, base, dir, filepath.Join(root, "state2")); err == nil {
		t.Fatal("a layer with a named pipe was copied")
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the failed workspace is left: %v", err)
	}
}

// firstLayerCopy makes a repository and a first copy workspace of its
// HEAD (root/ws1), which makes the commit's layer in a new cache.
func firstLayerCopy(t *testing.T) (p Provider, c *LayerCache, repo, base, root string) {
	t.Helper()
	repo, base = newRepo(t)
	c = NewLayerCache(t.TempDir())
	t.Cleanup(c.Wait)
	p, root = NewLayerCopy(c), t.TempDir()
	if _, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws1"), filepath.Join(root, "state1")); err != nil {
		t.Fatal(err)
	}
	return p, c, repo, base, root
}
