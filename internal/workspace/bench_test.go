package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

var fixture10k struct {
	once       sync.Once
	repo, base string
	err        error
}

// repo10k builds, once per test binary, a repository of 10,000 files in
// 100 directories.
func repo10k(b *testing.B) (string, string) {
	b.Helper()
	fixture10k.once.Do(func() {
		// Said until the repository is made: a failure below ends the
		// first benchmark, and the next ones must not take an empty result.
		fixture10k.err = errors.New("the 10,000-file repository could not be made (see the first benchmark)")
		dir, err := os.MkdirTemp("", "agentrun-ws-10k-")
		if err != nil {
			fixture10k.err = err
			return
		}
		benchCleanup = append(benchCleanup, dir)
		files := make(map[string]string, 100*100)
		for d := range 100 {
			for f := range 100 {
				files[fmt.Sprintf("pkg%d/f%d.go", d, f)] = fmt.Sprintf("package pkg%d\n\n// File %d of directory %d.\nfunc F%d() int { return %d }\n", d, f, d, f, d*100+f)
			}
		}
		repo := filepath.Join(dir, "repo")
		fixture10k.repo, fixture10k.base, fixture10k.err = repo, testsupport.RepoAt(b, repo, files), nil
	})
	if fixture10k.err != nil {
		b.Fatal(fixture10k.err)
	}
	return fixture10k.repo, fixture10k.base
}

// benchCleanup lists fixture directories TestMain removes.
var benchCleanup []string

func smallRepo(b *testing.B) (string, string) {
	b.Helper()
	return testsupport.Repo(b, map[string]string{"README.md": "# small\n"})
}

func benchCreate(b *testing.B, repo, base string) {
	ctx := context.Background()
	root := b.TempDir()
	p := NewCheckout()
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		n := strconv.Itoa(i)
		if _, err := p.Create(ctx, repo, base, filepath.Join(root, "ws"+n), filepath.Join(root, "state"+n)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

func BenchmarkCreateSmall(b *testing.B) {
	repo, base := smallRepo(b)
	benchCreate(b, repo, base)
}

func BenchmarkCreate10k(b *testing.B) {
	repo, base := repo10k(b)
	benchCreate(b, repo, base)
}

func BenchmarkScan10kOneChange(b *testing.B) {
	repo, base := repo10k(b)
	root := b.TempDir()
	ws, err := NewCheckout().Create(context.Background(), repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state"))
	if err != nil {
		b.Fatal(err)
	}
	writeFile(b, filepath.Join(ws.Dir(), "pkg42", "f7.go"), "package pkg42\n\n// changed\n", 0o644)
	b.ResetTimer()
	for b.Loop() {
		cs, err := ws.Scan(context.Background(), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if len(cs.Changes) != 1 {
			b.Fatalf("changes = %v", kinds(cs))
		}
	}
}

func BenchmarkExportOneFile(b *testing.B) {
	repo, base := smallRepo(b)
	cs := &ChangeSet{Changes: []Change{{Path: "src/new.go", Kind: "add", Mode: modeFile, Content: []byte("package src\n")}}}
	patchDir := b.TempDir()
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		opts := ExportOptions{
			Repo: repo, Base: base, Branch: "agentrun/bench" + strconv.Itoa(i),
			Message: "bench\n\nAgentrun-Run: bench\n", PatchPath: filepath.Join(patchDir, "result.patch"),
		}
		if _, err := Export(context.Background(), cs, opts); err != nil {
			b.Fatal(err)
		}
	}
}
