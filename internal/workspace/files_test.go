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
