package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/bootid"
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
	checkCopy(t, ws, dir, l, base)
	if refs, _ := os.ReadDir(filepath.Join(l.dir, layerRefs)); len(refs) != 0 {
		t.Errorf("the copy took a ref on the layer: %v", refs)
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
	// Not the spare the first copy left: it was made before the pipe.
	c.WaitSpares()
	if err := RemoveTree(filepath.Join(c.layer(layerKey(base)).dir, layerSpare)); err != nil {
		t.Fatal(err)
	}
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

// A spare is made a moment after the workspace that asked for it, not
// while that run starts its sandbox and agent; WaitSpares makes the ones
// still waiting at once (a process about to exit).
func TestLayerCopySpareWaits(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	c := NewLayerCache(t.TempDir())
	c.spareDelay = time.Hour
	t.Cleanup(c.Wait)
	t.Cleanup(c.WaitSpares)
	p, root := NewLayerCopy(c), t.TempDir()
	if _, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws1"), filepath.Join(root, "state1")); err != nil {
		t.Fatal(err)
	}
	spare := filepath.Join(c.layer(layerKey(base)).dir, layerSpare)
	time.Sleep(300 * time.Millisecond) // a spare made at once is long done
	if _, err := os.Lstat(spare); !os.IsNotExist(err) {
		t.Fatalf("the spare was made before its delay: %v", err)
	}
	if _, pending := c.sparing.Load(layerKey(base)); !pending {
		t.Fatal("no spare is waiting to be made")
	}
	done := make(chan struct{})
	go func() { c.WaitSpares(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("WaitSpares waited out the spare's delay")
	}
	if _, err := os.Lstat(spare); err != nil {
		t.Fatalf("WaitSpares returned without the spare: %v", err)
	}
}

// firstLayerCopy makes a repository and a first copy workspace of its
// HEAD (root/ws1), which makes the commit's layer in a new cache.
func firstLayerCopy(t *testing.T) (p Provider, c *LayerCache, repo, base, root string) {
	t.Helper()
	repo, base = newRepo(t)
	c = NewLayerCache(t.TempDir())
	t.Cleanup(c.Wait)
	t.Cleanup(c.WaitSpares)
	p, root = NewLayerCopy(c), t.TempDir()
	if _, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws1"), filepath.Join(root, "state1")); err != nil {
		t.Fatal(err)
	}
	return p, c, repo, base, root
}

// A copy workspace leaves a spare copy of its layer behind it (made in
// the background), which the next copy workspace on the commit takes: by
// Fill, moved into the directory that exists already (a sandbox may hold
// it: the directory stays the same one), by Create, renamed into place.
// Each workspace is its own copy, complete and clean, and the taker
// leaves a new spare behind it in turn.
func TestLayerCopySpare(t *testing.T) {
	t.Parallel()
	p, c, repo, base, root := firstLayerCopy(t)
	ctx := context.Background()
	l := c.layer(layerKey(base))
	spare := filepath.Join(l.dir, layerSpare)
	c.WaitSpares()
	info, err := readLayerInfo(l)
	if err != nil {
		t.Fatal(err)
	}
	spareIno := func() uint64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(spare, layerTree, "README.md"), &st); err != nil {
			t.Fatalf("no spare: %v", err)
		}
		return st.Ino
	}
	before := spareIno()
	if cls, err := c.List(); err != nil || len(cls) != 1 || cls[0].Bytes != 2*info.Bytes {
		t.Fatalf("the cache counts %+v (%v), want the layer's %d bytes twice (its spare)", cls, err, info.Bytes)
	}

	dir := filepath.Join(root, "filled")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(dir) // as a sandbox started on it would hold it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ws, err := p.(Filler).Fill(ctx, repo, base, dir, filepath.Join(root, "state-filled"))
	if err != nil {
		t.Fatal(err)
	}
	var a, b syscall.Stat_t
	if err := syscall.Fstat(int(held.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(dir, &b); err != nil || a.Ino != b.Ino {
		t.Fatalf("the directory filled is not the one held (inode %d, now %d: %v)", a.Ino, b.Ino, err)
	}
	if names, err := held.Readdirnames(-1); err != nil || !slices.Contains(names, "README.md") {
		t.Fatalf("through the held directory: %v %v", names, err)
	}
	var got syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(dir, "README.md"), &got); err != nil || got.Ino != before {
		t.Fatalf("the fill did not take the spare (README.md inode %d, the spare's %d): %v", got.Ino, before, err)
	}
	checkCopy(t, ws, dir, l, base)
	c.WaitSpares()
	if again := spareIno(); again == before {
		t.Fatal("the spare taken is still in place")
	}

	made := filepath.Join(root, "created")
	next := spareIno()
	ws2, err := p.Create(ctx, repo, base, made, filepath.Join(root, "state-created"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(made, "README.md"), &got); err != nil || got.Ino != next {
		t.Fatalf("the create did not take the spare: %v", err)
	}
	checkCopy(t, ws2, made, l, base)
	// The two workspaces share nothing.
	writeFile(t, filepath.Join(made, "README.md"), "changed\n", 0o644)
	if got := kinds(scanWS(t, ws2, Limits{})); len(got) != 1 || got["README.md"] == "" {
		t.Fatalf("changes: %v", got)
	}
	if cs := scanWS(t, ws, Limits{}); len(cs.Changes) != 0 {
		t.Fatalf("a change in one workspace shows in the other: %v", kinds(cs))
	}
	// Open reads the taken spare's manifest.
	if ws3, err := p.Open(ctx, made, filepath.Join(root, "state-created")); err != nil || len(scanWS(t, ws3, Limits{}).Changes) != 1 {
		t.Fatalf("open: %v", err)
	}
}

// checkCopy checks that ws at dir is a complete copy workspace of base,
// its own (no file linked to layer l's), with nothing changed.
func checkCopy(t *testing.T, ws Workspace, dir string, l layer, base string) {
	t.Helper()
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
	if cs := scanWS(t, ws, Limits{}); len(cs.Changes) != 0 {
		t.Fatalf("changes in a fresh copy: %v", kinds(cs))
	}
}

// A spare made in another boot (its files were never synced) is thrown
// away, not used: the workspace is copied, and a new spare made.
func TestLayerCopySpareOfAnotherBoot(t *testing.T) {
	t.Parallel()
	p, c, repo, base, root := firstLayerCopy(t)
	l := c.layer(layerKey(base))
	c.WaitSpares()
	writeFile(t, filepath.Join(l.dir, layerSpare, spareBoot), "another boot", 0o644)
	// Marked, to tell it from a copy (an inode number may be reused once
	// the spare is removed).
	writeFile(t, filepath.Join(l.dir, layerSpare, layerTree, "marked"), "from the spare\n", 0o644)
	dir := filepath.Join(root, "ws2")
	ws, err := p.Create(context.Background(), repo, base, dir, filepath.Join(root, "state2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "marked")); !os.IsNotExist(err) {
		t.Fatalf("the spare of another boot was used: %v", err)
	}
	checkCopy(t, ws, dir, l, base)
	c.WaitSpares()
	if b, err := os.ReadFile(filepath.Join(l.dir, layerSpare, spareBoot)); err != nil || string(b) != bootid.ID() {
		t.Fatalf("no new spare: %q %v", b, err)
	}
}

// Of workspaces made at once, one takes the spare and the others copy:
// each is complete and its own.
func TestLayerCopySpareTakenOnce(t *testing.T) {
	t.Parallel()
	p, c, repo, base, root := firstLayerCopy(t)
	l := c.layer(layerKey(base))
	c.WaitSpares()
	const n = 4
	var wg sync.WaitGroup
	wss, errs := make([]Workspace, n), make([]error, n)
	for i := range n {
		wg.Go(func() {
			wss[i], errs[i] = p.Create(context.Background(), repo, base, filepath.Join(root, fmt.Sprint("ws", i+2)), filepath.Join(root, fmt.Sprint("state", i+2)))
		})
	}
	wg.Wait()
	inos := map[uint64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		dir := filepath.Join(root, fmt.Sprint("ws", i+2))
		checkCopy(t, wss[i], dir, l, base)
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, "README.md"), &st); err != nil || inos[st.Ino] {
			t.Fatalf("two workspaces share README.md: %v", err)
		}
		inos[st.Ino] = true
	}
}

// A layer larger than spares are kept of gets none.
func TestLayerCopyNoSpareOfALargeLayer(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	c := NewLayerCache(t.TempDir())
	c.maxSpareFiles = 1
	t.Cleanup(c.Wait)
	p, root := NewLayerCopy(c), t.TempDir()
	if _, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws1"), filepath.Join(root, "state1")); err != nil {
		t.Fatal(err)
	}
	c.WaitSpares()
	if _, err := os.Lstat(filepath.Join(c.layer(layerKey(base)).dir, layerSpare)); !os.IsNotExist(err) {
		t.Fatalf("a layer of more files than the bound got a spare: %v", err)
	}
}
