package testsupport_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestRepoCommitsFiles(t *testing.T) {
	t.Parallel()
	dir, commit := testsupport.Repo(t, map[string]string{"README.md": "hello\n", "src/deep/a.go": "package deep\n"})
	if head := testsupport.Git(t, dir, "rev-parse", "HEAD"); head != commit {
		t.Fatalf("HEAD %s, Repo said %s", head, commit)
	}
	if branch := testsupport.Git(t, dir, "symbolic-ref", "--short", "HEAD"); branch != "main" {
		t.Fatalf("branch %q", branch)
	}
	if tree := testsupport.Git(t, dir, "ls-tree", "-r", "--name-only", commit); tree != "README.md\nsrc/deep/a.go" {
		t.Fatalf("tree:\n%s", tree)
	}
	if st := testsupport.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("left uncommitted:\n%s", st)
	}
	if who := testsupport.Git(t, dir, "log", "-1", "--format=%an <%ae> %cn <%ce>"); who != "Test <test@example.com> Test <test@example.com>" {
		t.Fatalf("identity %q", who)
	}
	// Raw bytes through GitCmd, untrimmed.
	if b, err := testsupport.GitCmd(t, dir, "cat-file", "blob", commit+":README.md").Output(); err != nil || string(b) != "hello\n" {
		t.Fatalf("README.md = %q, %v", b, err)
	}
}

func TestRepoEmptyCommit(t *testing.T) {
	t.Parallel()
	dir, commit := testsupport.Repo(t, nil)
	if tree := testsupport.Git(t, dir, "ls-tree", commit); tree != "" {
		t.Fatalf("tree of an empty commit:\n%s", tree)
	}
}

// RepoAt commits what the caller made in the directory too, with its mode.
func TestRepoAtKeepsSymlinksAndModes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "user")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("README.md", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	commit := testsupport.RepoAt(t, dir, map[string]string{"README.md": "x\n"})
	want := map[string]string{"README.md": "100644", "link": "120000", "run.sh": "100755"}
	for _, line := range strings.Split(testsupport.Git(t, dir, "ls-tree", commit), "\n") {
		mode, name, _ := strings.Cut(line, " ")
		name = name[strings.IndexByte(name, '\t')+1:]
		if want[name] != mode {
			t.Errorf("%s: mode %s, want %q", name, mode, want[name])
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Errorf("not committed: %v", want)
	}
}

func TestRepoInitArgs(t *testing.T) {
	t.Parallel()
	dir, commit := testsupport.Repo(t, map[string]string{"a": "a"}, "--object-format=sha256")
	if len(commit) != 64 {
		t.Fatalf("commit %q is not a sha256 name", commit)
	}
	if f := testsupport.Git(t, dir, "rev-parse", "--show-object-format"); f != "sha256" {
		t.Fatalf("object format %q", f)
	}
}

// Not parallel: it sets the environment. The machine's git config and an
// inherited GIT_DIR (as a test run from a git hook has) change nothing.
func TestGitIgnoresTheMachine(t *testing.T) {
	other, otherHead := testsupport.Repo(t, nil)
	traps := t.TempDir()
	global := filepath.Join(traps, "gitconfig")
	hooks := filepath.Join(traps, "hooks")
	marker := filepath.Join(traps, "PWNED")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "pre-commit"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(traps, "ignore"), []byte("*.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "[user]\n\tname = Wrong\n[commit]\n\tgpgSign = true\n[core]\n\thooksPath = " + hooks +
		"\n\texcludesFile = " + filepath.Join(traps, "ignore") + "\n[init]\n\tdefaultBranch = trunk\n"
	if err := os.WriteFile(global, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_AUTHOR_NAME", "Wrong")

	dir, commit := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	if tree := testsupport.Git(t, dir, "ls-tree", "--name-only", commit); tree != "a.txt" {
		t.Fatalf("tree %q", tree)
	}
	if who := testsupport.Git(t, dir, "log", "-1", "--format=%an %D"); who != "Test HEAD -> main" {
		t.Fatalf("commit by %q", who)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook from the global config ran")
	}
	if head := testsupport.Git(t, other, "rev-parse", "HEAD"); head != otherHead {
		t.Fatalf("the repository GIT_DIR named moved to %s", head)
	}
}
