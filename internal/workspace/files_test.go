package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// CommitDir makes the same commit of the same files anywhere, and FileAt
// reads a commit's files from the objects: a file, a missing path, a
// directory (not a file), a path that is refused.
func TestCommitDirAndFileAt(t *testing.T) {
	testsupport.Program(t, "git")
	ctx := context.Background()
	commit := func() (string, string) {
		dir := filepath.Join(t.TempDir(), "r")
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string]string{"a.txt": "a\n", "sub/b.sh": "echo b\n", "sub/with space.txt": "s\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c, err := CommitDir(ctx, dir, "fixture")
		if err != nil {
			t.Fatal(err)
		}
		return dir, c
	}
	dir, c1 := commit()
	_, c2 := commit()
	if c1 != c2 {
		t.Errorf("the same files made commits %s and %s", c1, c2)
	}
	if _, err := CommitDir(ctx, dir, "again"); err == nil {
		t.Error("CommitDir of a repository: no error")
	}
	r, err := OpenRepo(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
		ok         bool
	}{{"a.txt", "a\n", true}, {"sub/b.sh", "echo b\n", true}, {"sub/with space.txt", "s\n", true}, {"missing", "", false}, {"sub", "", false}} {
		data, ok, err := r.FileAt(ctx, c1, c.path)
		if err != nil || ok != c.ok || string(data) != c.want {
			t.Errorf("FileAt %s: %q %v %v, want %q %v", c.path, data, ok, err, c.want, c.ok)
		}
	}
	for _, p := range []string{"../x", ".git/config", "/etc/passwd"} {
		if _, _, err := r.FileAt(ctx, c1, p); err == nil {
			t.Errorf("FileAt %s: no error", p)
		}
	}
	if data, ok, err := r.FileAt(ctx, strings.Repeat("ab", 20), "a.txt"); ok || err != nil {
		t.Errorf("FileAt of a commit the repository lacks: %q %v %v", data, ok, err)
	}
	if _, _, err := r.FileAt(ctx, "HEAD", "a.txt"); err == nil {
		t.Error("FileAt of a ref, not a commit id: no error")
	}
}

// TestFileAtRemembersCommits: an answer about a commit the repository
// holds (a file, or no file at that path) is remembered, since it is the
// same in every repository that holds the commit: it is given again
// without git, even where git could not be asked. An answer for a commit
// the repository lacks is not remembered: once the commit is there, the
// file is read.
func TestFileAtRemembersCommits(t *testing.T) {
	ctx := context.Background()
	dir, commit := testsupport.Repo(t, map[string]string{"remembered.toml": "x = 1\n"})
	nowhere := t.TempDir() // not a repository: git fails there
	if data, ok, err := FileAtDir(ctx, dir, commit, "remembered.toml"); !ok || err != nil || string(data) != "x = 1\n" {
		t.Fatalf("read: %q %v %v", data, ok, err)
	}
	if _, ok, err := FileAtDir(ctx, dir, commit, "absent.toml"); ok || err != nil {
		t.Fatalf("absent: %v %v", ok, err)
	}
	if data, ok, err := FileAtDir(ctx, nowhere, commit, "remembered.toml"); !ok || err != nil || string(data) != "x = 1\n" {
		t.Errorf("not remembered: %q %v %v", data, ok, err)
	}
	if _, ok, err := FileAtDir(ctx, nowhere, commit, "absent.toml"); ok || err != nil {
		t.Errorf("the absent file not remembered: %v %v", ok, err)
	}

	// Another repository, without the commit yet.
	other, _ := testsupport.Repo(t, map[string]string{"other.txt": "o\n"})
	next := testsupport.Git(t, dir, "commit-tree", "-m", "next", "-p", commit, commit+"^{tree}")
	if _, ok, err := FileAtDir(ctx, other, next, "remembered.toml"); ok || err != nil {
		t.Fatalf("a commit the repository lacks: %v %v", ok, err)
	}
	testsupport.Git(t, other, "fetch", "-q", dir, next)
	if data, ok, err := FileAtDir(ctx, other, next, "remembered.toml"); !ok || err != nil || string(data) != "x = 1\n" {
		t.Errorf("once the commit is there: %q %v %v", data, ok, err)
	}
}

// PrefetchFiles reads several files of a commit in one git process, for
// the FileAtDir calls after it: those answer without git (here where git
// could not be asked), a file, a missing path and a directory alike.
func TestPrefetchFiles(t *testing.T) {
	ctx := context.Background()
	dir, commit := testsupport.Repo(t, map[string]string{"pre.toml": "p = 1\n", ".gitmodules": "[submodule \"x\"]\n\tpath = x\n", "d/f": "f\n"})
	nowhere := t.TempDir()
	PrefetchFiles(ctx, dir, commit, "pre.toml", ".gitmodules", "absent", "d", "../refused")
	for path, want := range map[string]string{"pre.toml": "p = 1\n", ".gitmodules": "[submodule \"x\"]\n\tpath = x\n", "absent": "", "d": ""} {
		data, ok, err := FileAtDir(ctx, nowhere, commit, path)
		if err != nil || ok != (want != "") || string(data) != want {
			t.Errorf("%s after the prefetch: %q %v %v, want %q", path, data, ok, err, want)
		}
	}
}
