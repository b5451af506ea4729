package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

func TestSetupKeyNamesItsInputs(t *testing.T) {
	t.Parallel()
	base := SetupInput{Commit: "c1", Command: "make deps", Allow: []string{"b", "a"}, Backend: "native"}
	same := base
	same.Allow = []string{"a", "b", "a"}
	same.Repo = "/elsewhere"
	if SetupKey(base) != SetupKey(same) {
		t.Fatal("the allowlist's order, duplicates or the repository changed the key")
	}
	for _, in := range []SetupInput{
		{Commit: "c2", Command: "make deps", Allow: []string{"a", "b"}, Backend: "native"},
		{Commit: "c1", Command: "make all", Allow: []string{"a", "b"}, Backend: "native"},
		{Commit: "c1", Command: "make deps", Allow: []string{"a"}, Backend: "native"},
		{Commit: "c1", Command: "make deps", Allow: []string{"a", "b"}, Backend: "docker"},
		{Commit: "c1", Command: "make deps", Allow: []string{"a", "b"}, Backend: "native", Image: "sha256:x"},
	} {
		if SetupKey(in) == SetupKey(base) {
			t.Fatalf("%+v has the key of %+v", in, base)
		}
	}
}

// copyBuilder is a builder in Mode copy that writes files into the tree
// and HOME, counting its calls.
func copyBuilder(calls *atomic.Int32, files map[string]string) SetupBuilder {
	return func(ctx context.Context, b SetupBuild) (string, error) {
		calls.Add(1)
		for p, s := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(b.Tree, p)), 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(b.Tree, p), []byte(s), 0o644); err != nil {
				return "", err
			}
		}
		mod := filepath.Join(b.Home, "go", "pkg", "mod")
		if err := os.MkdirAll(mod, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(mod, "m.txt"), []byte("module\n"), 0o444); err != nil {
			return "", err
		}
		return SetupCopy, os.Chmod(mod, 0o555) // as Go leaves its cache
	}
}

func TestSetupLayerBuiltOnceAndCollected(t *testing.T) {
	t.Parallel()
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	in := SetupInput{Repo: "/r", Commit: "0123456789abcdef0123456789abcdef01234567", Command: "deps", Backend: "host"}
	var calls atomic.Int32
	root := t.TempDir()
	const n = 6
	var wg sync.WaitGroup
	got := make([]SetupLayer, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = c.AcquireSetup(context.Background(), in, filepath.Join(root, "state"+strconv.Itoa(i)), copyBuilder(&calls, map[string]string{"node_modules/x/index.js": "x\n"}))
		})
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i].Made {
			made++
		}
		if got[i].Key != SetupKey(in) || got[i].Info.Mode != SetupCopy || got[i].Info.Command != "deps" {
			t.Fatalf("layer %d = %+v", i, got[i])
		}
	}
	if calls.Load() != 1 || made != 1 {
		t.Fatalf("built %d times, made reported %d times", calls.Load(), made)
	}
	if b, err := os.ReadFile(filepath.Join(got[0].Home(), "go", "pkg", "mod", "m.txt")); err != nil || string(b) != "module\n" {
		t.Fatalf("home: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(got[0].Home(), "tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the setup's tmp was kept: %v", err)
	}
	if l, ok := c.SetupLayerOf(filepath.Join(root, "state3")); !ok || l.Key != got[0].Key {
		t.Fatalf("SetupLayerOf = %+v %v", l, ok)
	}
	list, err := c.ListSetup(func(commit string) bool { return commit == in.Commit })
	if err != nil || len(list) != 1 || list[0].Workspaces != n || list[0].Bytes <= 0 || list[0].Command != "deps" {
		t.Fatalf("ListSetup = %+v, %v", list, err)
	}
	if list, _ := c.ListSetup(func(string) bool { return false }); len(list) != 0 {
		t.Fatalf("ListSetup kept a layer of another repository: %+v", list)
	}
	// In use: kept; once the workspaces are gone: collected.
	if removed, _, err := c.Collect(context.Background(), CollectOptions{}); err != nil || len(removed) != 0 {
		t.Fatalf("Collect removed a layer in use: %+v %v", removed, err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	c.Wait() // (the background sync holds the layer's lock a moment)
	removed, _, err := c.Collect(context.Background(), CollectOptions{})
	if err != nil || len(removed) != 1 || removed[0].Key != got[0].Key {
		t.Fatalf("Collect = %+v %v", removed, err)
	}
	if _, err := os.Lstat(got[0].Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the layer is still there: %v", err)
	}
}

func TestSetupBuildFailureCachesNothing(t *testing.T) {
	t.Parallel()
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	in := SetupInput{Commit: "0123456789abcdef0123456789abcdef01234567", Command: "false"}
	boom := errors.New("setup exited 1")
	_, err := c.AcquireSetup(context.Background(), in, t.TempDir(), func(context.Context, SetupBuild) (string, error) { return "", boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if list, _ := c.ListSetup(nil); len(list) != 0 {
		t.Fatalf("a failed setup was cached: %+v", list)
	}
	var calls atomic.Int32
	if l, err := c.AcquireSetup(context.Background(), in, t.TempDir(), copyBuilder(&calls, nil)); err != nil || !l.Made || calls.Load() != 1 {
		t.Fatalf("the next try did not build: %+v %v", l, err)
	}
}

func TestApplySetupCopyMode(t *testing.T) {
	t.Parallel()
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	var calls atomic.Int32
	l, err := c.AcquireSetup(context.Background(), SetupInput{Commit: "c", Command: "x"}, t.TempDir(),
		copyBuilder(&calls, map[string]string{"a.txt": "new\n", "dir/b.txt": "b\n"}))
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	outside := t.TempDir()
	for p, s := range map[string]string{"a.txt": "old\n", "gone.txt": "x\n", "dir/stale": "s\n"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		_ = os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644)
	}
	if err := ApplySetup(context.Background(), l, ws); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a.txt": "new\n", "dir/b.txt": "b\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(b) != want {
			t.Fatalf("%s = %q %v", p, b, err)
		}
	}
	for _, p := range []string{"gone.txt", "dir/stale"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there: %v", p, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("something was written outside: %v", ents)
	}
}

// TestApplySetupUpperLayer applies a layer in Mode overlay by copying:
// whiteouts delete, opaque directories replace, and a symlink in the
// layer never leads a write outside the workspace.
func TestApplySetupUpperLayer(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("making a whiteout (a 0/0 character device) and a trusted layer by hand needs root")
	}
	c := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	outside := t.TempDir()
	l, err := c.AcquireSetup(context.Background(), SetupInput{Commit: "c", Command: "y"}, t.TempDir(), func(_ context.Context, b SetupBuild) (string, error) {
		for _, d := range []string{"opaque", "link"} {
			_ = os.MkdirAll(filepath.Join(b.Tree, d), 0o755)
		}
		_ = os.WriteFile(filepath.Join(b.Tree, "opaque", "kept"), []byte("k\n"), 0o644)
		if err := unix.Setxattr(filepath.Join(b.Tree, "opaque"), overlay.OpaqueXattr, []byte("y"), 0); err != nil {
			return "", err
		}
		if err := unix.Mknod(filepath.Join(b.Tree, "deleted"), unix.S_IFCHR|0o600, 0); err != nil {
			return "", err
		}
		_ = os.RemoveAll(filepath.Join(b.Tree, "link"))
		if err := os.Symlink(outside, filepath.Join(b.Tree, "esc")); err != nil {
			return "", err
		}
		_ = os.MkdirAll(filepath.Join(b.Tree, "esc2"), 0o755)
		return SetupOverlay, nil
	})
	if err != nil {
		t.Skipf("the file system takes no overlay markers here: %v", err)
	}
	ws := t.TempDir()
	for p, s := range map[string]string{"deleted": "d\n", "opaque/old": "o\n", "base.txt": "b\n"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		_ = os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644)
	}
	if err := ApplySetup(context.Background(), l, ws); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"deleted": false, "opaque/old": false, "opaque/kept": true, "base.txt": true, "esc": true} {
		if _, err := os.Lstat(filepath.Join(ws, p)); (err == nil) != want {
			t.Fatalf("%s: present %v, want %v", p, err == nil, want)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("something was written outside: %v", ents)
	}
}
