package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestMain gives every git process of the tests (ours and the package's) a
// known global config and no system config.
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

// tgit runs git as a test (or as the agent would) in dir.
func tgit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := tgitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(out)
}

func tgitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	return string(out), err
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

// newRepo makes a user repository with a few files and returns its path
// and HEAD commit.
func newRepo(t testing.TB, extraInit ...string) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "user")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tgit(t, dir, append([]string{"init", "-q"}, extraInit...)...)
	writeFile(t, filepath.Join(dir, "README.md"), "# project\n\nline two\n", 0o644)
	writeFile(t, filepath.Join(dir, "src", "main.go"), "package main\n\nfunc main() {}\n", 0o644)
	writeFile(t, filepath.Join(dir, "src", "util.go"), "package main\n\nfunc helper() int { return 1 }\n", 0o644)
	writeFile(t, filepath.Join(dir, "scripts", "run.sh"), "#!/bin/sh\necho run\n", 0o755)
	writeFile(t, filepath.Join(dir, "notes.txt"), "some notes\n", 0o644)
	if err := os.Symlink("README.md", filepath.Join(dir, "readme-link")); err != nil {
		t.Fatal(err)
	}
	tgit(t, dir, "add", "-A")
	tgit(t, dir, "commit", "-q", "-m", "initial")
	return dir, tgit(t, dir, "rev-parse", "HEAD")
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
