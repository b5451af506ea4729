package workspace

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// The copy-on-write workspace side by side with the plain checkout and
// with `git worktree add` (what a worktree-based tool does), in one run:
//
//	go test -run '^$' -bench 'Workspace' ./internal/workspace/
//
// cached: a workspace on a base commit whose layer is made already (and
// WorkspaceCached: the same for 10 to 100,000 files); new-commit: the
// first workspace on a commit (the overlay makes its layer), and
// WorkspaceNewCommit: the same in pairs with `git worktree add`.
// ScanExportOneChange is the host's work after the agent changed one
// file, for 10 to 100,000 files: open the workspace, scan, then the
// export commit and patch (git processes in the user's repository,
// whatever the workspace).

func repo10(b *testing.B) (string, string) { return repoFiles(b, 10) }

func BenchmarkWorkspace(b *testing.B) {
	for _, size := range []struct {
		name string
		repo func(*testing.B) (string, string)
	}{{"files=10", repo10}, {"files=10000", repo10k}} {
		b.Run(size.name, func(b *testing.B) {
			repo, base := size.repo(b)
			b.Run("git-worktree-add", func(b *testing.B) { benchWorktree(b, repo, base) })
			b.Run("checkout", func(b *testing.B) { benchProvider(b, NewCheckout(), repo, base) })
			b.Run("overlay-cached", func(b *testing.B) { benchCached(b, benchCache(b), repo, base) })
			b.Run("overlay-new-commit", func(b *testing.B) { benchOverlayNew(b, repo, base) })
		})
	}
}

// BenchmarkWorkspaceCached is the workspace on a cached base commit for
// 10 to 100,000 files: the same cost whatever the size (the layer of each
// size is made once, outside the timer).
func BenchmarkWorkspaceCached(b *testing.B) {
	for _, n := range []int{10, 10000, 100000} {
		b.Run("files="+strconv.Itoa(n), func(b *testing.B) {
			repo, base := repoFiles(b, n)
			benchCached(b, sharedCache(b), repo, base)
		})
	}
}

// benchCached makes workspaces on base once its layer is in c and on
// disk: the layer's background sync would otherwise run beside the
// timed work.
func benchCached(b *testing.B, c *LayerCache, repo, base string) {
	p := NewOverlay(c)
	root := b.TempDir()
	if _, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state")); err != nil {
		b.Fatal(err)
	}
	c.Wait()
	syncPath(b, root)
	benchProvider(b, p, repo, base)
}

// BenchmarkWorkspaceNewCommit is the first workspace on a new commit
// beside `git worktree add` of it, in pairs, one after the other: on a
// machine whose disk is shared, the pair sees the same load, so the
// ratio of each pair holds where the times drift. Before each of the two
// the file system's dirty data is written out (syncfs, outside the
// timings), so that neither pays for the other's writeback, and the
// layer's own background sync is waited for outside them too. Reported:
// the medians of each and of the ratios (x-worktree).
func BenchmarkWorkspaceNewCommit(b *testing.B) {
	repo, base := repo10k(b)
	ctx := context.Background()
	c := benchCache(b)
	p := NewOverlay(c)
	root := b.TempDir()
	tree := testsupport.Git(b, repo, "rev-parse", base+"^{tree}")
	var ours, theirs, ratios []float64
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		n := strconv.Itoa(i)
		commit := testsupport.Git(b, repo, "commit-tree", "-p", base, "-m", "bench "+n, tree)
		syncPath(b, root)
		t0 := time.Now()
		testsupport.Git(b, repo, "worktree", "add", "-q", "--detach", filepath.Join(root, "wt"+n), commit)
		wt := time.Since(t0)
		syncPath(b, root)
		b.StartTimer() // ns/op: the overlay's alone
		t0 = time.Now()
		if _, err := p.Create(ctx, repo, commit, filepath.Join(root, "ws"+n), filepath.Join(root, "state"+n)); err != nil {
			b.Fatal(err)
		}
		ov := time.Since(t0)
		b.StopTimer()
		c.Wait()
		ours, theirs = append(ours, ms(ov)), append(theirs, ms(wt))
		ratios = append(ratios, float64(ov)/float64(wt))
		b.StartTimer()
	}
	b.ReportMetric(median(ours), "ms-overlay(median)")
	b.ReportMetric(median(theirs), "ms-worktree(median)")
	b.ReportMetric(median(ratios), "x-worktree(median)")
	testsupport.Git(b, repo, "worktree", "prune")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// syncPath writes the dirty data of the file system holding path to disk.
func syncPath(b *testing.B, path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := syncFS(fd); err != nil {
		b.Fatal(err)
	}
}

func benchWorktree(b *testing.B, repo, base string) {
	root := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		testsupport.Git(b, repo, "worktree", "add", "-q", "--detach", filepath.Join(root, "wt"+strconv.Itoa(i)), base)
	}
	b.StopTimer()
	testsupport.Git(b, repo, "worktree", "prune")
	_ = os.RemoveAll(root)
	testsupport.Git(b, repo, "worktree", "prune")
}

func benchProvider(b *testing.B, p Provider, repo, base string) {
	ctx := context.Background()
	root := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		n := strconv.Itoa(i)
		if _, err := p.Create(ctx, repo, base, filepath.Join(root, "ws"+n), filepath.Join(root, "state"+n)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchOverlayNew makes each workspace on a commit of its own (the same
// tree, a new commit made outside the timer): every Create makes a layer.
func benchOverlayNew(b *testing.B, repo, base string) {
	ctx := context.Background()
	p := NewOverlay(benchCache(b))
	root := b.TempDir()
	tree := testsupport.Git(b, repo, "rev-parse", base+"^{tree}")
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		commit := testsupport.Git(b, repo, "commit-tree", "-p", base, "-m", "bench "+strconv.Itoa(i), tree)
		n := strconv.Itoa(i)
		b.StartTimer()
		if _, err := p.Create(ctx, repo, commit, filepath.Join(root, "ws"+n), filepath.Join(root, "state"+n)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScanExportOneChange(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		p    func(*testing.B) Provider
	}{
		{"files=10000/checkout", 10000, func(*testing.B) Provider { return NewCheckout() }},
		{"files=10/overlay", 10, func(b *testing.B) Provider { return NewOverlay(sharedCache(b)) }},
		{"files=10000/overlay", 10000, func(b *testing.B) Provider { return NewOverlay(sharedCache(b)) }},
		{"files=100000/overlay", 100000, func(b *testing.B) Provider { return NewOverlay(sharedCache(b)) }},
	} {
		b.Run(c.name, func(b *testing.B) { benchScanExport(b, c.n, c.p(b)) })
	}
}

// benchScanExport is the host's work after the agent: open the workspace
// from its directories (as the supervisor does), scan it, export.
func benchScanExport(b *testing.B, n int, p Provider) {
	repo, base := repoFiles(b, n)
	ctx := context.Background()
	root := b.TempDir()
	dir, state := filepath.Join(root, "ws"), filepath.Join(root, "state")
	ws, err := p.Create(ctx, repo, base, dir, state)
	if err != nil {
		b.Fatal(err)
	}
	if o, ok := p.(*overlayProvider); ok {
		o.cache.Wait() // the layer's background sync, not beside the timed work
	}
	// One base file rewritten, as the agent would (for the overlay: the
	// kernel's copy-up in the upper layer).
	writeFile(b, filepath.Join(ws.Dir(), "pkg0", "f7.go"), "package pkg0\n\n// changed\n", 0o644)
	scanOne := func() *ChangeSet {
		ws, err := p.Open(ctx, dir, state)
		if err != nil {
			b.Fatal(err)
		}
		cs, err := ws.Scan(ctx, Limits{})
		if err != nil || len(cs.Changes) != 1 {
			b.Fatal(cs, err)
		}
		return cs
	}
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			scanOne()
		}
	})
	patchDir := b.TempDir()
	i := 0
	b.Run("scan+export", func(b *testing.B) {
		for b.Loop() {
			i++
			cs := scanOne()
			opts := ExportOptions{Repo: repo, Base: base, Branch: "agentrun/bench-" + strconv.Itoa(i),
				Message: "bench\n\nAgentrun-Run: bench\n", PatchPath: filepath.Join(patchDir, "result.patch"),
				// The supervisor reads the identity while the agent works.
				AuthorName: "Bench", AuthorEmail: "bench@example.com"}
			if _, err := Export(ctx, cs, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchCache is a layer cache removed, once its background syncs are
// done, when b ends.
func benchCache(b *testing.B) *LayerCache {
	c := NewLayerCache(filepath.Join(b.TempDir(), "layers"))
	b.Cleanup(c.Wait)
	return c
}

// sharedLayers is one layer cache for the benchmarks of the test binary
// that want a layer made once (of 100,000 files: seconds), removed by
// TestMain.
var sharedLayers struct {
	once sync.Once
	c    *LayerCache
	err  error
}

func sharedCache(b *testing.B) *LayerCache {
	sharedLayers.once.Do(func() {
		dir, err := os.MkdirTemp("", "agentrun-ws-layers-")
		if err != nil {
			sharedLayers.err = err
			return
		}
		benchCleanup = append(benchCleanup, dir)
		sharedLayers.c = NewLayerCache(filepath.Join(dir, "layers"))
	})
	if sharedLayers.err != nil {
		b.Fatal(sharedLayers.err)
	}
	b.Cleanup(sharedLayers.c.Wait)
	return sharedLayers.c
}

// BenchmarkDiskOf32Workspaces reports the disk 32 workspaces on one base
// commit of the 10,000-file repository take, as a multiple of one plain
// checkout's (disk-x): the overlay's are one shared layer and 32 empty
// upper layers.
func BenchmarkDiskOf32Workspaces(b *testing.B) {
	repo, base := repo10k(b)
	ctx := context.Background()
	root := b.TempDir()
	if _, err := NewCheckout().Create(ctx, repo, base, filepath.Join(root, "one"), filepath.Join(root, "one-state")); err != nil {
		b.Fatal(err)
	}
	one, _, _ := DiskUse(filepath.Join(root, "one"), 0)
	st, _, _ := DiskUse(filepath.Join(root, "one-state"), 0)
	one += st
	for b.Loop() {
		dir := b.TempDir()
		c := NewLayerCache(filepath.Join(dir, "layers"))
		p := NewOverlay(c)
		for i := range 32 {
			n := strconv.Itoa(i)
			if _, err := p.Create(ctx, repo, base, filepath.Join(dir, "ws"+n), filepath.Join(dir, "state"+n)); err != nil {
				b.Fatal(err)
			}
		}
		c.Wait()
		all, _, _ := DiskUse(dir, 0)
		b.ReportMetric(float64(all)/float64(one), "disk-x")
	}
}
