package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// fixtures holds the benchmark repositories, made once per test binary
// and size.
var fixtures struct {
	sync.Mutex
	by map[int]*fixture
}

type fixture struct {
	once       sync.Once
	repo, base string
	err        error
}

// repo10k is the repository of 10,000 files in 100 directories.
func repo10k(b *testing.B) (string, string) { return repoFiles(b, 10000) }

// repoFiles builds, once per test binary, a repository of n files, 100
// to a directory (n < 100: one directory), and returns it and its commit.
// It is written with one fast-import stream, so that it is one pack, as a
// cloned repository is: no checkout of n files to make it, and no
// automatic gc repacking loose objects in the background while the
// benchmarks run (a commit of 10,000 loose objects starts one).
func repoFiles(b *testing.B, n int) (string, string) {
	b.Helper()
	fixtures.Lock()
	if fixtures.by == nil {
		fixtures.by = map[int]*fixture{}
	}
	f := fixtures.by[n]
	if f == nil {
		f = &fixture{}
		fixtures.by[n] = f
	}
	fixtures.Unlock()
	f.once.Do(func() {
		// Said until the repository is made: a failure below ends the
		// first benchmark, and the next ones must not take an empty result.
		f.err = fmt.Errorf("the %d-file repository could not be made (see the first benchmark)", n)
		dir, err := os.MkdirTemp("", "agentrun-ws-"+strconv.Itoa(n)+"-")
		if err != nil {
			f.err = err
			return
		}
		benchCleanup = append(benchCleanup, dir)
		repo := filepath.Join(dir, "repo")
		testsupport.Git(b, dir, "init", "-q", "-b", "main", repo)
		cmd := testsupport.GitCmd(b, repo, "fast-import", "--quiet", "--done")
		cmd.Stdin = fixtureStream(n)
		if out, err := cmd.CombinedOutput(); err != nil {
			f.err = fmt.Errorf("fast-import: %v\n%s", err, out)
			return
		}
		f.repo, f.base, f.err = repo, testsupport.Git(b, repo, "rev-parse", "main"), nil
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f.repo, f.base
}

// fixtureStream is the fast-import stream of the fixture of n files: one
// commit on main.
func fixtureStream(n int) io.Reader {
	var buf bytes.Buffer
	msg := fmt.Sprintf("%d files\n", n)
	fmt.Fprintf(&buf, "commit refs/heads/main\ncommitter Test <test@example.com> 1700000000 +0000\ndata %d\n%s", len(msg), msg)
	for i := range n {
		d, f := i/100, i%100
		content := fmt.Sprintf("package pkg%d\n\n// File %d of directory %d.\nfunc F%d() int { return %d }\n", d, f, d, f, i)
		fmt.Fprintf(&buf, "M 100644 inline pkg%d/f%d.go\ndata %d\n%s\n", d, f, len(content), content)
	}
	buf.WriteString("\ndone\n")
	return &buf
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
