package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestMain gives every git process the package starts a known global
// config and no system config (the tests' own git, testsupport.Git, reads
// neither).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentrun-ws-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	global := filepath.Join(dir, "gitconfig")
	cfg := "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
	if err := os.WriteFile(global, []byte(cfg), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("GIT_CONFIG_GLOBAL", global)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	code := m.Run()
	_ = os.RemoveAll(dir)
	for _, d := range benchCleanup {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

// requireCap skips when a capability is missing, and fails instead when
// AGENTRUN_REQUIRE_CAPS=1.
func requireCap(t testing.TB, ok bool, reason string) {
	t.Helper()
	testsupport.Require(t, "a capability", ok, "%s", reason)
}

func requireRoot(t testing.TB) {
	requireCap(t, os.Geteuid() == 0, "needs root (mknod)")
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a user repository with a few files, among them a script
// and a symlink, and returns its path and HEAD commit.
func newRepo(t testing.TB, initArgs ...string) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "user")
	writeFile(t, filepath.Join(dir, "scripts", "run.sh"), "#!/bin/sh\necho run\n", 0o755)
	if err := os.Symlink("README.md", filepath.Join(dir, "readme-link")); err != nil {
		t.Fatal(err)
	}
	return dir, testsupport.RepoAt(t, dir, map[string]string{
		"README.md":   "# project\n\nline two\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
		"src/util.go": "package main\n\nfunc helper() int { return 1 }\n",
		"notes.txt":   "some notes\n",
	}, initArgs...)
}

// newWorkspace creates a checkout workspace of base from repo.
func newWorkspace(t testing.TB, repo, base string) (Workspace, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ws")
	ws, err := NewCheckout().Create(context.Background(), repo, base, dir, filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	return ws, dir
}

func scanWS(t testing.TB, ws Workspace, lim Limits) *ChangeSet {
	t.Helper()
	cs, err := ws.Scan(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// kinds maps path to "kind mode" for compact comparison.
func kinds(cs *ChangeSet) map[string]string {
	m := map[string]string{}
	for _, c := range cs.Changes {
		m[c.Path] = fmt.Sprintf("%s %o", c.Kind, c.Mode)
	}
	return m
}

// refusedPaths lists the refused paths with their reasons.
func refusedPaths(cs *ChangeSet) map[string]string {
	m := map[string]string{}
	for _, r := range cs.Refused {
		m[r.Path] = r.Reason
	}
	return m
}

func exportOpts(t testing.TB, repo, base, branch string) ExportOptions {
	return ExportOptions{
		Repo:      repo,
		Base:      base,
		Branch:    branch,
		Message:   "Fix the thing\n\nAgentrun-Run: abc1234567\n",
		PatchPath: filepath.Join(t.TempDir(), "result.patch"),
	}
}

// noMarkers fails if any marker file exists.
func noMarkers(t testing.TB, markers ...string) {
	t.Helper()
	for _, m := range markers {
		if _, err := os.Stat(m); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("marker %s exists: host ran something the agent controlled (err=%v)", m, err)
		}
	}
}

// markerScript writes an executable script that creates marker, returning
// its path.
func markerScript(t testing.TB, dir, name, marker string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeFile(t, p, "#!/bin/sh\ntouch '"+marker+"'\ncat\n", 0o755)
	return p
}

func sortedKeys(m map[string]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// patchGivesCommit applies patch (git apply --index, with args) to a
// checkout of base in a new worktree of repo and fails t unless the tree
// it gives is commit's.
func patchGivesCommit(t testing.TB, repo, base, patch, commit string, args ...string) {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	testsupport.Git(t, repo, "worktree", "add", "-q", "--detach", clone, base)
	testsupport.Git(t, clone, append(append([]string{"apply", "--index"}, args...), patch)...)
	if tree, want := testsupport.Git(t, clone, "write-tree"), testsupport.Git(t, repo, "rev-parse", commit+"^{tree}"); tree != want {
		t.Fatalf("patched tree %s, commit tree %s", tree, want)
	}
	testsupport.Git(t, repo, "worktree", "remove", "--force", clone)
}
