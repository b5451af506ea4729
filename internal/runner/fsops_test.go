package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRel(t *testing.T) {
	root := t.TempDir()
	s, err := newServer(ServerOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for in, want := range map[string]string{
		"":                 ".",
		".":                ".",
		"a/b":              "a/b",
		"a/../b":           "b",
		"./a//b/":          "a/b",
		root:               ".",
		root + "/x/y":      "x/y",
		root + "/x/../y":   "y",
		"..":               "escape",
		"../x":             "escape",
		"a/../../x":        "escape",
		"/etc/passwd":      "escape",
		root + "/../x":     "escape",
		root + "x/y":       "escape", // a sibling sharing the prefix
		filepath.Dir(root): "escape",
		"..foo":            "..foo",
		"a/..b":            "a/..b",
	} {
		got, err := s.rel(in)
		if err != nil {
			if !IsCode(err, CodeEscape) {
				t.Errorf("%q: %v", in, err)
			}
			got = "escape"
		}
		if got != want {
			t.Errorf("rel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"", "a/b.go", true},
		{"*.go", "b.go", true},
		{"*.go", "a/b/c.go", true},
		{"*.go", "a/b/c.txt", false},
		{"**/*.go", "c.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"a/**/*.go", "a/c.go", true},
		{"a/**/*.go", "a/x/y/c.go", true},
		{"a/**/*.go", "b/x/c.go", false},
		{"a/*.go", "a/x/c.go", false},
		{"a/**", "a/x/c.go", true},
		{"src/*/x.go", "src/util/x.go", true},
		{"[", "x", false},
	} {
		if got := globMatch(tc.glob, tc.path); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.glob, tc.path, got)
		}
	}
}

func TestResultCacheBounds(t *testing.T) {
	c := newResultCache(3, 1<<20)
	for _, id := range []string{"w1", "r1", "w2", "w3"} {
		op := opExec
		if id[0] == 'r' {
			op = opReadFile
		}
		c.put(doneOp(id, op, 10))
	}
	if c.get("w1") != nil || !c.forgotten("w1") {
		t.Fatal("oldest mutating entry not evicted and remembered")
	}
	if c.get("w3") == nil || c.get("r1") == nil {
		t.Fatal("recent entries evicted")
	}
	c.put(doneOp("w4", opExec, 10)) // evicts w2 (r1 and w3 were used more recently)
	if c.get("w2") != nil || !c.forgotten("w2") {
		t.Fatal("least recently used not evicted")
	}
	// The byte budget evicts too; a read-only entry is just dropped.
	b := newResultCache(100, 1000)
	b.put(doneOp("r1", opReadFile, 600))
	b.put(doneOp("r2", opReadFile, 600))
	if b.get("r1") != nil || b.forgotten("r1") || b.get("r2") == nil {
		t.Fatal("byte budget not applied")
	}
}

func doneOp(id, op string, size int) *execution {
	e := newExecution(id, op)
	e.out[0] = make([]byte, size)
	e.finish(&response{ID: id, Done: true})
	return e
}

// TestWriteRaceWithSymlinkSwap flips a directory between a real directory
// and a symlink pointing out of the root while writing through it: no
// write may ever land outside.
func TestWriteRaceWithSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	os.MkdirAll(root, 0o755)
	os.MkdirAll(outside, 0o755)
	c := testClient(t, testServer(t, root, ServerOptions{}))
	d := filepath.Join(root, "d")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			os.RemoveAll(d)
			os.Mkdir(d, 0o755)
			os.RemoveAll(d)
			os.Symlink(outside, d)
		}
	}()
	ctx := context.Background()
	deadline := time.Now().Add(time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		c.WriteFile(ctx, WriteFileRequest{Path: "d/f", Data: []byte("x")})
		c.EditFile(ctx, EditFileRequest{Path: "d/f", Old: "x", New: "y"})
		c.ReadFile(ctx, ReadFileRequest{Path: "d/f"})
	}
	stop.Store(true)
	wg.Wait()
	ents, _ := os.ReadDir(outside)
	if len(ents) != 0 {
		t.Fatalf("a write escaped through the swapped symlink: %v", ents)
	}
}

func TestBadPaths(t *testing.T) {
	c := testClient(t, testServer(t, t.TempDir(), ServerOptions{}))
	ctx := context.Background()
	long := strings.Repeat("a", 300)
	for _, p := range []string{"a\x00b", long, strings.Repeat(long+"/", 20) + "f"} {
		if _, err := c.WriteFile(ctx, WriteFileRequest{Path: p, Data: []byte("x")}); !IsCode(err, CodeBadRequest) {
			t.Errorf("write %.20q: %v", p, err)
		}
		if _, err := c.ReadFile(ctx, ReadFileRequest{Path: p}); !IsCode(err, CodeBadRequest) && !IsCode(err, CodeNotFound) {
			t.Errorf("read %.20q: %v", p, err)
		}
	}
}

func TestSymlinkLoop(t *testing.T) {
	root := t.TempDir()
	os.Symlink("b", filepath.Join(root, "a"))
	os.Symlink("a", filepath.Join(root, "b"))
	c := testClient(t, testServer(t, root, ServerOptions{}))
	_, err := c.ReadFile(context.Background(), ReadFileRequest{Path: "a"})
	var oe *OpError
	if !errorsAs(err, &oe) {
		t.Fatalf("a symlink loop is not an op error: %v", err)
	}
}
