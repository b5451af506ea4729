package workspacetest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Bench measures p's hot operations on a small repository (100 files in
// 10 directories): Create of a workspace from its base commit, and Scan
// of a workspace with one changed file.
func Bench(b *testing.B, p workspace.Provider) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git is not installed")
	}
	repo, base := benchRepo(b)
	ctx := context.Background()
	b.Run("Create", func(b *testing.B) {
		root := b.TempDir()
		i := 0
		for b.Loop() {
			i++
			n := strconv.Itoa(i)
			if _, err := p.Create(ctx, repo, base, filepath.Join(root, "ws"+n), filepath.Join(root, "state"+n)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ScanOneChange", func(b *testing.B) {
		root := b.TempDir()
		ws, err := p.Create(ctx, repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state"))
		if err != nil {
			b.Fatal(err)
		}
		write(b, filepath.Join(ws.Dir(), "pkg4", "f7.go"), "package pkg4\n\n// changed\n", 0o644)
		for b.Loop() {
			cs, err := ws.Scan(ctx, workspace.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			if len(cs.Changes) != 1 {
				b.Fatalf("changes = %v", summary(cs))
			}
		}
	})
}

// benchRepo makes a user repository of 100 files in 10 directories and
// returns it and its commit.
func benchRepo(b *testing.B) (repo, base string) {
	b.Helper()
	repo = filepath.Join(b.TempDir(), "user")
	for d := range 10 {
		for f := range 10 {
			content := fmt.Sprintf("package pkg%d\n\n// File %d of directory %d.\nfunc F%d() int { return %d }\n", d, f, d, f, d*10+f)
			write(b, filepath.Join(repo, "pkg"+strconv.Itoa(d), "f"+strconv.Itoa(f)+".go"), content, 0o644)
		}
	}
	testsupport.Git(b, repo, "init", "-q")
	testsupport.Git(b, repo, "add", "-A")
	testsupport.Git(b, repo, "commit", "-q", "-m", "100 files")
	return repo, testsupport.Git(b, repo, "rev-parse", "HEAD")
}
