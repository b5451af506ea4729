package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// The copy-on-write workspace side by side with the plain checkout and
// with `git worktree add` (what a worktree-based tool does), in one run:
//
//	go test -run '^$' -bench 'Workspace' ./internal/workspace/
//
// cached: a workspace on a base commit whose layer is made already;
// new-commit: the first workspace on a commit (the overlay makes its
// layer). ScanExportOneChange is the host's work after the agent changed
// one file of the 10,000: scan, then the export commit and patch (three
// git processes in the user's repository, whatever the workspace).

func repo10(b *testing.B) (string, string) {
	b.Helper()
	files := map[string]string{}
	for i := range 10 {
		files[fmt.Sprintf("pkg/f%d.go", i)] = fmt.Sprintf("package pkg\n\nconst F%d = %d\n", i, i)
	}
	return testsupport.Repo(b, files)
}

func BenchmarkWorkspace(b *testing.B) {
	for _, size := range []struct {
		name string
		repo func(*testing.B) (string, string)
	}{{"files=10", repo10}, {"files=10000", repo10k}} {
		b.Run(size.name, func(b *testing.B) {
			repo, base := size.repo(b)
			b.Run("git-worktree-add", func(b *testing.B) { benchWorktree(b, repo, base) })
			b.Run("checkout", func(b *testing.B) { benchProvider(b, NewCheckout(), repo, base) })
			b.Run("overlay-cached", func(b *testing.B) {
				p := NewOverlay(benchCache(b))
				root := b.TempDir()
				if _, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state")); err != nil {
					b.Fatal(err)
				}
				benchProvider(b, p, repo, base)
			})
			b.Run("overlay-new-commit", func(b *testing.B) { benchOverlayNew(b, repo, base) })
		})
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
	repo, base := repo10k(b)
	for _, p := range []struct {
		name string
		p    Provider
	}{{"checkout", NewCheckout()}, {"overlay", NewOverlay(benchCache(b))}} {
		b.Run("files=10000/"+p.name, func(b *testing.B) {
			root := b.TempDir()
			ws, err := p.p.Create(context.Background(), repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state"))
			if err != nil {
				b.Fatal(err)
			}
			// One base file rewritten, as the agent would (for the
			// overlay: the kernel's copy-up in the upper layer).
			writeFile(b, filepath.Join(ws.Dir(), "pkg42", "f7.go"), "package pkg42\n\n// changed\n", 0o644)
			b.Run("scan", func(b *testing.B) {
				for b.Loop() {
					if cs, err := ws.Scan(context.Background(), Limits{}); err != nil || len(cs.Changes) != 1 {
						b.Fatal(cs, err)
					}
				}
			})
			patchDir := b.TempDir()
			i := 0
			b.Run("scan+export", func(b *testing.B) {
				for b.Loop() {
					i++
					cs, err := ws.Scan(context.Background(), Limits{})
					if err != nil {
						b.Fatal(err)
					}
					if len(cs.Changes) != 1 {
						b.Fatalf("changes = %v", kinds(cs))
					}
					opts := ExportOptions{Repo: repo, Base: base, Branch: "agentrun/bench-" + p.name + strconv.Itoa(i),
						Message: "bench\n\nAgentrun-Run: bench\n", PatchPath: filepath.Join(patchDir, "result.patch"),
						// The supervisor reads the identity while the agent works.
						AuthorName: "Bench", AuthorEmail: "bench@example.com"}
					if _, err := Export(context.Background(), cs, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// benchCache is a layer cache removed, once its background syncs are
// done, when b ends.
func benchCache(b *testing.B) *LayerCache {
	c := NewLayerCache(filepath.Join(b.TempDir(), "layers"))
	b.Cleanup(c.Wait)
	return c
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
