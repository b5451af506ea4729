package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// includeRepo is a repository whose .gitignore ignores .env, config/
// local.yml, bin/, links/ and special/, with those files in its working
// tree, and notes.txt untracked but not ignored.
func includeRepo(t *testing.T) (repo, base string) {
	t.Helper()
	repo, base = testsupport.Repo(t, map[string]string{
		"a.txt":              "a\n",
		".gitignore":         ".env\nconfig/local.yml\nbin/\nlinks/\nspecial/\n",
		"config/default.yml": "x: 1\n",
	})
	for p, content := range map[string]string{".env": "SECRET=1\n", "config/local.yml": "x: 2\n", "bin/tool": "#!/bin/sh\n", "notes.txt": "n\n"} {
		write(t, filepath.Join(repo, p), content)
	}
	if err := os.Chmod(filepath.Join(repo, "bin/tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	return repo, base
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestResolveInclude(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := includeRepo(t)
	got, err := ResolveInclude(ctx, repo, []string{".env", "config/local.yml", "/bin/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".env 9 " + sha("SECRET=1\n") + " 100644", "bin/tool 10 " + sha("#!/bin/sh\n") + " 100755", "config/local.yml 5 " + sha("x: 2\n") + " 100644"}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i, f := range got {
		if s := strings.Join([]string{f.Path, itoa(f.Size), f.SHA256, f.Mode}, " "); s != want[i] {
			t.Errorf("%d: %s, want %s", i, s, want[i])
		}
	}
	if none, err := ResolveInclude(ctx, repo, []string{"nothing-matches"}); err != nil || len(none) != 0 {
		t.Fatalf("no match: %+v %v", none, err)
	}
	// A symlink within the repository is taken as a symlink.
	if err := os.MkdirAll(filepath.Join(repo, "links"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a.txt", filepath.Join(repo, "links/in")); err != nil {
		t.Fatal(err)
	}
	if got, err := ResolveInclude(ctx, repo, []string{"links/in"}); err != nil || len(got) != 1 || got[0].Mode != "120000" || got[0].SHA256 != sha("../a.txt") {
		t.Fatalf("symlink within: %+v %v", got, err)
	}
}

func TestResolveIncludeRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := includeRepo(t)
	if err := os.MkdirAll(filepath.Join(repo, "links"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": "/etc/passwd", "out": "../../outside", "git": "../.git/config"} {
		if err := os.Symlink(target, filepath.Join(repo, "links", name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(repo, "special"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(repo, "special/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ pattern, path, why string }{
		{"a.txt", "a.txt", "tracked"},
		{"*.yml", "config/default.yml", "tracked"},
		{"notes.txt", "notes.txt", "not ignored"},
		{"links/abs", "links/abs", "absolute"},
		{"links/out", "links/out", "leaves the repository"},
		{"links/git", "links/git", "into .git"},
	} {
		_, err := ResolveInclude(ctx, repo, []string{c.pattern})
		var ie *IncludeError
		if !errors.As(err, &ie) || ie.Path != c.path || !strings.Contains(ie.Why, c.why) {
			t.Errorf("%s: %v", c.pattern, err)
		}
	}
	// git lists no special file; were one named, it is refused.
	if got, err := ResolveInclude(ctx, repo, []string{"special/"}); err != nil || len(got) != 0 {
		t.Fatalf("a FIFO: %+v %v", got, err)
	}
	var ie *IncludeError
	if _, err := hashIncluded(repo, []string{"special/fifo"}); !errors.As(err, &ie) || !strings.Contains(ie.Why, "not a regular file") {
		t.Fatalf("a FIFO named: %v", err)
	}
	// Past the size bound (a sparse file: nothing is read).
	big := filepath.Join(repo, "bin/big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxIncludeBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveInclude(ctx, repo, []string{"bin/"}); !errors.Is(err, ErrIncludeTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

func TestReadIncludeList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if p, found, err := ReadIncludeList(dir); err != nil || found || p != nil {
		t.Fatalf("none: %v %v %v", p, found, err)
	}
	write(t, filepath.Join(dir, IncludeListName), "# local settings\n.env\n\nconfig/local.yml\r\n")
	p, found, err := ReadIncludeList(dir)
	if err != nil || !found || strings.Join(p, ",") != ".env,config/local.yml" {
		t.Fatalf("%q %v %v", p, found, err)
	}
	other := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, IncludeListName), filepath.Join(other, IncludeListName)); err != nil {
		t.Fatal(err)
	}
	var ie *IncludeError
	if _, _, err := ReadIncludeList(other); !errors.As(err, &ie) {
		t.Fatalf("a symlinked list: %v", err)
	}
}

// TestIncludeIntoWorkspaces: the included files land in a copy's tree
// and in an overlay's upper layer (never its shared lower layer), are
// never exported, and an agent's change to one is reported.
func TestIncludeIntoWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := includeRepo(t)
	files, err := ResolveInclude(ctx, repo, []string{".env", "config/local.yml", "bin/"})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cache := NewLayerCache(filepath.Join(root, "layers"))
	t.Cleanup(cache.Wait)
	cp, err := NewCheckout().Create(ctx, repo, base, filepath.Join(root, "copy"), filepath.Join(root, "copy-state"))
	if err != nil {
		t.Fatal(err)
	}
	ov, err := NewOverlay(cache).Create(ctx, repo, base, filepath.Join(root, "upper"), filepath.Join(root, "upper-state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []Workspace{cp, ov} {
		if err := Include(ctx, ws, repo, files); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]string{".env": "SECRET=1\n", "config/local.yml": "x: 2\n", "bin/tool": "#!/bin/sh\n"} {
			if b, err := os.ReadFile(filepath.Join(ws.Dir(), p)); err != nil || string(b) != want {
				t.Errorf("%s %s: %q %v", ws.Dir(), p, b, err)
			}
		}
		if fi, err := os.Stat(filepath.Join(ws.Dir(), "bin/tool")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("bin/tool: %v %v", fi, err)
		}
	}
	lower := ov.(Layered).Layers().Lower
	if _, err := os.Lstat(filepath.Join(lower, ".env")); !os.IsNotExist(err) {
		t.Fatalf("an included file is in the shared layer: %v", err)
	}
	// The agent leaves .env, changes config/local.yml and writes a.txt.
	for _, ws := range []Workspace{cp, ov} {
		write(t, filepath.Join(ws.Dir(), "config/local.yml"), "x: 3\n")
		write(t, filepath.Join(ws.Dir(), "a.txt"), "changed\n")
		cs, err := ws.Scan(ctx, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		DropIncluded(cs, files)
		if len(cs.Changes) != 1 || cs.Changes[0].Path != "a.txt" {
			t.Errorf("%s: exported %+v", ws.Dir(), cs.Changes)
		}
		if changed := ChangedIncluded(ws, files); strings.Join(changed, ",") != "config/local.yml" {
			t.Errorf("%s: changed %v", ws.Dir(), changed)
		}
	}
	// A file that changed in the working tree since it was recorded.
	write(t, filepath.Join(repo, ".env"), "SECRET=2\n")
	again, err := NewCheckout().Create(ctx, repo, base, filepath.Join(root, "again"), filepath.Join(root, "again-state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Include(ctx, again, repo, files); err == nil || !strings.Contains(err.Error(), "changed in your working tree") {
		t.Fatalf("changed since: %v", err)
	}
}

// TestDropIncluded: an included file is never exported, whatever the
// agent did with it, nor what it put under an included path; a changed
// one is named.
func TestDropIncluded(t *testing.T) {
	t.Parallel()
	inc := includedOf([]runIncluded{{".env", "A=1\n"}, {"dir/x", "x\n"}})
	cs := &ChangeSet{Changes: []Change{
		{Path: ".env", Kind: "add", Mode: 0o100644, Content: []byte("A=1\n")},
		{Path: "dir/x/y", Kind: "add", Mode: 0o100644, Content: []byte("y\n")},
		{Path: "kept.txt", Kind: "add", Mode: 0o100644, Content: []byte("k\n")},
	}}
	if n := DropIncluded(cs, inc); n != 2 || len(cs.Changes) != 1 || cs.Changes[0].Path != "kept.txt" {
		t.Fatalf("dropped %d, kept %+v", n, cs.Changes)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".env"), "A=1\n")
	if err := os.MkdirAll(filepath.Join(dir, "dir/x"), 0o755); err != nil { // a file replaced by a directory
		t.Fatal(err)
	}
	if changed := ChangedIncluded(plainDir(dir), inc); strings.Join(changed, ",") != "dir/x" {
		t.Fatalf("changed %v", changed)
	}
	if err := os.Chmod(filepath.Join(dir, ".env"), 0o755); err != nil {
		t.Fatal(err)
	}
	if changed := ChangedIncluded(plainDir(dir), inc); strings.Join(changed, ",") != ".env,dir/x" {
		t.Fatalf("mode changed: %v", changed)
	}
}

// plainDir is a Workspace that is only a directory.
type plainDir string

func (d plainDir) Dir() string                                      { return string(d) }
func (d plainDir) Scan(context.Context, Limits) (*ChangeSet, error) { return &ChangeSet{}, nil }

type runIncluded struct{ path, content string }

func includedOf(fs []runIncluded) []run.IncludedFile {
	var out []run.IncludedFile
	for _, f := range fs {
		out = append(out, run.IncludedFile{Path: f.path, Size: int64(len(f.content)), SHA256: sha(f.content), Mode: "100644"})
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
