package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestOpenRepo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := newRepo(t)
	r, err := OpenRepo(ctx, filepath.Join(repo, "src"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Path() != repo {
		t.Fatalf("Path = %s, want the top level %s", r.Path(), repo)
	}
	if r.ObjectFormat() != "sha1" {
		t.Fatalf("format = %s", r.ObjectFormat())
	}

	empty := t.TempDir()
	unborn := filepath.Join(t.TempDir(), "unborn")
	testsupport.Git(t, filepath.Dir(unborn), "init", "-q", unborn)
	file := filepath.Join(t.TempDir(), "f")
	writeFile(t, file, "x", 0o644)
	for _, tc := range []struct {
		dir  string
		want catalog.Entry
	}{
		{filepath.Join(empty, "nope"), catalog.RepoMissing},
		{file, catalog.RepoMissing},
		{empty, catalog.NotGitRepo},
		{unborn, catalog.NoCommits},
	} {
		_, err := OpenRepo(ctx, tc.dir)
		if !catalog.Has(err, tc.want) {
			t.Errorf("OpenRepo(%s) = %v, want %s", tc.dir, err, tc.want.Code)
		}
	}
	// Inside .git, git finds the repository but no work tree: the error
	// says where the user is.
	_, err = OpenRepo(ctx, filepath.Join(unborn, ".git"))
	if !catalog.Has(err, catalog.NotGitRepo) || !strings.Contains(err.Error(), "is inside a repository's .git directory") {
		t.Errorf("OpenRepo in .git = %v", err)
	}
}

// TestInspect: the side-by-side inspection answers as OpenRepo,
// ResolveBase and Dirty do, with the same catalog errors.
func TestInspect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	r, got, dirty, err := Inspect(ctx, filepath.Join(repo, "src"), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Path() != repo || got != base || dirty {
		t.Fatalf("Inspect = %s %s dirty=%v, want %s %s clean", r.Path(), got, dirty, repo, base)
	}
	testsupport.Git(t, repo, "tag", "v1")
	if _, got, _, err = Inspect(ctx, repo, "v1"); err != nil || got != base {
		t.Fatalf("Inspect(v1) = %s, %v; want %s", got, err, base)
	}
	writeFile(t, filepath.Join(repo, "untracked.txt"), "x", 0o644)
	if _, _, dirty, err = Inspect(ctx, repo, "HEAD"); err != nil || !dirty {
		t.Fatalf("Inspect of a dirty tree: dirty=%v err=%v", dirty, err)
	}

	empty := t.TempDir()
	unborn := filepath.Join(t.TempDir(), "unborn")
	testsupport.Git(t, filepath.Dir(unborn), "init", "-q", unborn)
	for _, tc := range []struct {
		dir, ref string
		want     catalog.Entry
	}{
		{filepath.Join(empty, "nope"), "", catalog.RepoMissing},
		{empty, "", catalog.NotGitRepo},
		{empty, "v1", catalog.NotGitRepo},
		{unborn, "", catalog.NoCommits},
		{repo, "no-such-ref", catalog.UnknownBase},
		{repo, "--all", catalog.UnknownBase},
	} {
		if _, _, _, err := Inspect(ctx, tc.dir, tc.ref); !catalog.Has(err, tc.want) {
			t.Errorf("Inspect(%s, %q) = %v, want %s", tc.dir, tc.ref, err, tc.want.Code)
		}
	}
}

// Not parallel: it changes PATH.
func TestOpenRepoGitMissing(t *testing.T) {
	repo, _ := newRepo(t)
	t.Setenv("PATH", t.TempDir())
	if _, err := OpenRepo(context.Background(), repo); !catalog.Has(err, catalog.GitMissing) {
		t.Fatalf("err = %v, want git_missing", err)
	}
}

func TestResolveBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	testsupport.Git(t, repo, "tag", "v1")
	testsupport.Git(t, repo, "tag", "-a", "-m", "annotated", "v1a")
	r := mustRepo(t, repo)
	for _, ref := range []string{"", "HEAD", "main", "v1", "v1a", base, base[:10], "HEAD~0"} {
		got, err := r.ResolveBase(ctx, ref)
		if err != nil || got != base {
			t.Errorf("ResolveBase(%q) = %s, %v; want %s", ref, got, err, base)
		}
	}
	out := filepath.Join(t.TempDir(), "written")
	for _, ref := range []string{"nope", "-h", "--output=" + out, "--all", "-q", "HEAD^{tree}", "main:README.md", "a\nb"} {
		if got, err := r.ResolveBase(ctx, ref); !catalog.Has(err, catalog.UnknownBase) {
			t.Errorf("ResolveBase(%q) = %q, %v; want unknown_base", ref, got, err)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a ref was read as an option")
	}
}

func TestDirty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, _ := newRepo(t)
	r := mustRepo(t, repo)
	check := func(want bool) {
		t.Helper()
		got, err := r.Dirty(ctx)
		if err != nil || got != want {
			t.Fatalf("Dirty = %v, %v; want %v", got, err, want)
		}
	}
	check(false)
	writeFile(t, filepath.Join(repo, ".gitignore"), "*.log\n", 0o644)
	testsupport.Git(t, repo, "add", ".gitignore")
	testsupport.Git(t, repo, "commit", "-q", "-m", "ignore")
	writeFile(t, filepath.Join(repo, "debug.log"), "ignored\n", 0o644)
	check(false)
	writeFile(t, filepath.Join(repo, "untracked.txt"), "x\n", 0o644)
	check(true)
	if err := os.Remove(filepath.Join(repo, "untracked.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "notes.txt"), "edited\n", 0o644)
	check(true)
}

func TestBranchHelpers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	r := mustRepo(t, repo)
	if _, ok, err := r.BranchTip(ctx, "agentrun/x"); ok || err != nil {
		t.Fatalf("missing branch: ok=%v err=%v", ok, err)
	}
	testsupport.Git(t, repo, "branch", "agentrun/x", base)
	tip, ok, err := r.BranchTip(ctx, "agentrun/x")
	if !ok || err != nil || tip != base {
		t.Fatalf("BranchTip = %s %v %v", tip, ok, err)
	}
	// The branch moves: deleting with the old tip keeps it.
	writeFile(t, filepath.Join(repo, "n.txt"), "n\n", 0o644)
	testsupport.Git(t, repo, "add", "n.txt")
	testsupport.Git(t, repo, "commit", "-q", "-m", "n")
	moved := testsupport.Git(t, repo, "rev-parse", "HEAD")
	testsupport.Git(t, repo, "branch", "-f", "agentrun/x", moved)
	if err := r.DeleteBranch(ctx, "agentrun/x", base); !errors.Is(err, ErrBranchMoved) {
		t.Fatalf("DeleteBranch of a moved branch: %v", err)
	}
	if tip, _, _ := r.BranchTip(ctx, "agentrun/x"); tip != moved {
		t.Fatal("moved branch deleted")
	}
	if err := r.DeleteBranch(ctx, "agentrun/x", moved); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.BranchTip(ctx, "agentrun/x"); ok {
		t.Fatal("branch still there")
	}
	if err := r.DeleteBranch(ctx, "agentrun/x", moved); err != nil {
		t.Fatalf("deleting a gone branch: %v", err)
	}
	for _, b := range []string{"-D", "--all", "a..b", "x.lock", "a b", "refs/heads/x", ""} {
		if _, _, err := r.BranchTip(ctx, b); err == nil {
			t.Errorf("BranchTip accepted %q", b)
		}
		if err := r.DeleteBranch(ctx, b, base); err == nil {
			t.Errorf("DeleteBranch accepted %q", b)
		}
	}
}

// Not parallel: it sets the global git config. A user's global filters,
// eol settings and templates must not change the bytes Create writes.
func TestCreateWritesRawBlobBytes(t *testing.T) {
	repo, _ := newRepo(t)
	writeFile(t, filepath.Join(repo, ".gitattributes"), "* filter=evil\n*.txt text eol=crlf\n", 0o644)
	writeFile(t, filepath.Join(repo, "lf.txt"), "a\nb\n", 0o644)
	testsupport.Git(t, repo, "add", "-A")
	testsupport.Git(t, repo, "commit", "-q", "-m", "attributes")
	base := testsupport.Git(t, repo, "rev-parse", "HEAD")

	traps := t.TempDir()
	marker := filepath.Join(traps, "PWNED-smudge")
	global := filepath.Join(traps, "gitconfig")
	writeFile(t, global, "[user]\n\tname = T\n\temail = t@e\n[core]\n\tautocrlf = true\n[filter \"evil\"]\n\tsmudge = "+
		markerScript(t, traps, "smudge.sh", marker)+"\n\tclean = cat\n\trequired = true\n", 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", global)

	ws, dir := newWorkspace(t, repo, base)
	noMarkers(t, marker)
	data, err := os.ReadFile(filepath.Join(dir, "lf.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "a\nb\n" {
		t.Fatalf("checked-out bytes %q, want the blob's", data)
	}
	if cs := scanWS(t, ws, Limits{}); len(cs.Changes) != 0 {
		t.Fatalf("changes on a fresh workspace: %v", kinds(cs))
	}
}
