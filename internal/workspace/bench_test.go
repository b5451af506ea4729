package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
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
		dir, err := os.MkdirTemp("", "agentrun-ws-10k-")
		if err != nil {
			fixture10k.err = err
			return
		}
		benchCleanup = append(benchCleanup, dir)
		repo := filepath.Join(dir, "repo")
		for d := range 100 {
			sub := filepath.Join(repo, "pkg"+strconv.Itoa(d))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				fixture10k.err = err
				return
			}
			for f := range 100 {
				content := fmt.Sprintf("package pkg%d\n\n// File %d of directory %d.\nfunc F%d() int { return %d }\n", d, f, d, f, d*100+f)
				if err := os.WriteFile(filepath.Join(sub, "f"+strconv.Itoa(f)+".go"), []byte(content), 0o644); err != nil {
					fixture10k.err = err
					return
				}
			}
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "10k files"}} {
			if out, err := tgitErr(repo, args...); err != nil {
				fixture10k.err = fmt.Errorf("git %v: %v\n%s", args, err, out)
				return
			}
		}
		out, err := tgitErr(repo, "rev-parse", "HEAD")
		fixture10k.repo, fixture10k.base, fixture10k.err = repo, out[:len(out)-1], err
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
	repo := filepath.Join(b.TempDir(), "repo")
	writeFile(b, filepath.Join(repo, "README.md"), "# small\n", 0o644)
	tgit(b, repo, "init", "-q")
	tgit(b, repo, "add", "-A")
	tgit(b, repo, "commit", "-q", "-m", "one file")
	return repo, tgit(b, repo, "rev-parse", "HEAD")
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
