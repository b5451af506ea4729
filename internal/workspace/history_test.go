package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestShareHistory: the repository's object directories (its own and its
// alternates') become the workspace's alternates and the shallow mark is
// lifted, so git log in a copy walks the whole history; an overlay's go
// into its upper layer, and its shared lower layer keeps its own.
func TestShareHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "1\n"})
	for _, n := range []string{"2", "3"} {
		write(t, filepath.Join(repo, "a.txt"), n+"\n")
		testsupport.Git(t, repo, "commit", "-q", "-am", "c"+n)
	}
	base := testsupport.Git(t, repo, "rev-parse", "HEAD")
	extra := t.TempDir()
	write(t, filepath.Join(repo, ".git/objects/info/alternates"), extra+"\n")
	dirs, err := ObjectDirs(ctx, repo)
	if err != nil || len(dirs) != 2 || dirs[0] != filepath.Join(repo, ".git", "objects") || dirs[1] != extra {
		t.Fatalf("%v %v", dirs, err)
	}
	root := t.TempDir()
	cp, err := NewCheckout().Create(ctx, repo, base, filepath.Join(root, "copy"), filepath.Join(root, "copy-state"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(testsupport.Git(t, cp.Dir(), "log", "--format=%s"), "\n"); n != 0 {
		t.Fatalf("shallow: %d more commits", n)
	}
	if err := ShareHistory(cp, dirs); err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(testsupport.Git(t, cp.Dir(), "log", "--format=%s"), "\n"); len(got) != 3 || got[0] != "c3" || got[1] != "c2" {
		t.Fatalf("full: %q", got)
	}
	cache := NewLayerCache(filepath.Join(root, "layers"))
	t.Cleanup(cache.Wait)
	ov, err := NewOverlay(cache).Create(ctx, repo, base, filepath.Join(root, "upper"), filepath.Join(root, "upper-state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ShareHistory(ov, dirs); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ov.Dir(), ".git/objects/info/alternates")); err != nil || string(b) != dirs[0]+"\n"+dirs[1]+"\n" {
		t.Fatalf("upper alternates: %q %v", b, err)
	}
	lower := ov.(Layered).Layers().Lower
	if b, err := os.ReadFile(filepath.Join(lower, ".git/shallow")); err != nil || strings.TrimSpace(string(b)) != base {
		t.Fatalf("the shared layer's shallow mark: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(lower, ".git/objects/info/alternates")); !os.IsNotExist(err) {
		t.Fatalf("the shared layer got alternates: %v", err)
	}
	cs, err := ov.Scan(ctx, Limits{})
	if err != nil || len(cs.Changes) != 0 || len(cs.Refused) != 0 {
		t.Fatalf("the upper .git is a change: %+v %v", cs, err)
	}
}
