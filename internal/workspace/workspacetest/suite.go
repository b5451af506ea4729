// Package workspacetest is the conformance suite of the workspace seam:
// every workspace.Provider (the plain checkout now, copy-on-write later)
// passes Run, in a few lines of its own test, and measures itself with
// Bench:
//
//	func TestConformance(t *testing.T) { workspacetest.Run(t, NewProvider()) }
//	func BenchmarkConformance(b *testing.B) { workspacetest.Bench(b, NewProvider()) }
//
// The suite uses real git repositories in t.TempDir(), acts as the agent in
// the workspace (and runs git there as the agent would), then scans and
// exports as the host does. It checks the contract, not the mechanism:
// the tree tools see, what Scan reports and refuses, and what Export
// writes. It must never need anything but git and a POSIX file system.
package workspacetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Run runs the suite against p.
func Run(t *testing.T, p workspace.Provider) {
	t.Helper()
	testsupport.Program(t, "git")
	t.Run("CreateGivesACheckout", func(t *testing.T) { t.Parallel(); createGivesACheckout(t, p) })
	t.Run("UntouchedHasNoChanges", func(t *testing.T) { t.Parallel(); untouchedHasNoChanges(t, p) })
	t.Run("ChangesExport", func(t *testing.T) { t.Parallel(); changesExport(t, p) })
	t.Run("OpenSeesTheSameChanges", func(t *testing.T) { t.Parallel(); openSeesTheSameChanges(t, p) })
	t.Run("HostileEntriesAreRefused", func(t *testing.T) { t.Parallel(); hostileEntriesAreRefused(t, p) })
	t.Run("Limits", func(t *testing.T) { t.Parallel(); limits(t, p) })
	t.Run("IgnoredUntrackedPaths", func(t *testing.T) { t.Parallel(); ignoredUntrackedPaths(t, p) })
}

// fixture is a user repository and a workspace made from it.
type fixture struct {
	repo, base      string
	dir, stateDir   string
	ws              workspace.Workspace
	provider        workspace.Provider
	outsideTheTree  string // a directory beside the workspace, standing for the host
	outsideFileData string
}

func newFixture(t *testing.T, p workspace.Provider) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{repo: filepath.Join(root, "user"), dir: filepath.Join(root, "ws"), stateDir: filepath.Join(root, "state"), provider: p}
	f.outsideTheTree = filepath.Join(root, "host")
	f.outsideFileData = "host secret " + filepath.Base(root)
	write(t, filepath.Join(f.outsideTheTree, "secret"), f.outsideFileData, 0o600)
	write(t, filepath.Join(f.repo, "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	if err := os.Symlink("README.md", filepath.Join(f.repo, "link")); err != nil {
		t.Fatal(err)
	}
	f.base = testsupport.RepoAt(t, f.repo, map[string]string{
		"README.md": "# fixture\n",
		"src/a.go":  "package src\n\nconst A = 1\n",
		"src/b.go":  "package src\n\nconst B = 2\n",
	})
	ws, err := p.Create(context.Background(), f.repo, f.base, f.dir, f.stateDir)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	f.ws = ws
	return f
}

func write(t testing.TB, path, content string, mode os.FileMode) {
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

func (f *fixture) scan(t *testing.T, lim workspace.Limits) *workspace.ChangeSet {
	t.Helper()
	cs, err := f.ws.Scan(context.Background(), lim)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return cs
}

func summary(cs *workspace.ChangeSet) map[string]string {
	m := map[string]string{}
	for _, c := range cs.Changes {
		m[c.Path] = fmt.Sprintf("%s %o", c.Kind, c.Mode)
	}
	return m
}

func refused(cs *workspace.ChangeSet) map[string]string {
	m := map[string]string{}
	for _, r := range cs.Refused {
		m[r.Path] = r.Reason
	}
	return m
}

func createGivesACheckout(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	if f.ws.Dir() != f.dir {
		t.Errorf("Dir() = %s, want %s", f.ws.Dir(), f.dir)
	}
	if head := testsupport.Git(t, f.dir, "rev-parse", "HEAD"); head != f.base {
		t.Fatalf("workspace HEAD %s, want %s", head, f.base)
	}
	if st := testsupport.Git(t, f.dir, "status", "--porcelain"); st != "" {
		t.Fatalf("fresh workspace is not clean:\n%s", st)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "src", "a.go")); err != nil || string(b) != "package src\n\nconst A = 1\n" {
		t.Fatalf("src/a.go = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(f.dir, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Fatalf("run.sh lost its exec bit: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(f.dir, "link")); err != nil || target != "README.md" {
		t.Fatalf("link = %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, ".git", "objects", "info", "alternates")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace borrows objects through alternates: %v", err)
	}
	if _, err := p.Create(context.Background(), f.repo, f.base, f.dir, t.TempDir()); err == nil {
		t.Fatal("Create over an existing directory succeeded")
	}
}

func untouchedHasNoChanges(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	// The agent's own git use (status refreshes the index) is not a change.
	testsupport.Git(t, f.dir, "status")
	cs := f.scan(t, workspace.Limits{})
	if len(cs.Changes) != 0 || len(cs.Refused) != 0 {
		t.Fatalf("untouched workspace: changes %v, refused %v", summary(cs), cs.Refused)
	}
	_, err := workspace.Export(context.Background(), cs, exportOptions(t, f, "agentrun/none"))
	if !errors.Is(err, workspace.ErrNoChanges) {
		t.Fatalf("Export of nothing: %v, want ErrNoChanges", err)
	}
}

func exportOptions(t *testing.T, f *fixture, branch string) workspace.ExportOptions {
	return workspace.ExportOptions{
		Repo: f.repo, Base: f.base, Branch: branch,
		Message:    "Suite change\n\nAgentrun-Run: suite00001\n",
		AuthorName: "Suite", AuthorEmail: "suite@example.com",
		PatchPath: filepath.Join(t.TempDir(), "result.patch"),
	}
}

// agentEdits makes the usual kinds of change and returns what Scan must
// report.
func agentEdits(t *testing.T, dir string) map[string]string {
	write(t, filepath.Join(dir, "README.md"), "# fixture\n\nmore\n", 0o644)
	write(t, filepath.Join(dir, "new", "deep", "c.go"), "package deep\n", 0o644)
	write(t, filepath.Join(dir, "blob.bin"), "\x00\x01\xff binary", 0o644)
	if err := os.Remove(filepath.Join(dir, "src", "b.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "src", "a.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../README.md", filepath.Join(dir, "new", "readme")); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"README.md":     "modify 100644",
		"new/deep/c.go": "add 100644",
		"blob.bin":      "add 100644",
		"src/b.go":      "delete 100644",
		"src/a.go":      "modify 100755",
		"new/readme":    "add 120000",
	}
}

func sameSummary(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("changes = %v, want %v", got, want)
	}
}

func changesExport(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	want := agentEdits(t, f.dir)
	cs := f.scan(t, workspace.Limits{})
	sameSummary(t, summary(cs), want)
	opts := exportOptions(t, f, "agentrun/suite00001")
	res, err := workspace.Export(context.Background(), cs, opts)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if tip := testsupport.Git(t, f.repo, "rev-parse", "refs/heads/"+opts.Branch); tip != res.Commit {
		t.Fatalf("branch at %s, result %s", tip, res.Commit)
	}
	if parents := testsupport.Git(t, f.repo, "rev-list", "--parents", "-n1", res.Commit); parents != res.Commit+" "+f.base {
		t.Fatalf("parents: %s", parents)
	}
	if msg := testsupport.Git(t, f.repo, "log", "-1", "--format=%B", res.Commit); !strings.Contains(msg, "Agentrun-Run: suite00001") {
		t.Fatalf("message %q", msg)
	}
	if res.FilesChanged != len(want) {
		t.Fatalf("files changed %d, want %d", res.FilesChanged, len(want))
	}
	if b := testsupport.Git(t, f.repo, "cat-file", "-p", res.Commit+":new/deep/c.go"); b != "package deep" {
		t.Fatalf("new/deep/c.go = %q", b)
	}
	check := filepath.Join(t.TempDir(), "check")
	testsupport.Git(t, f.repo, "worktree", "add", "-q", "--detach", check, f.base)
	testsupport.Git(t, check, "apply", "--index", opts.PatchPath)
	if got, want := testsupport.Git(t, check, "write-tree"), testsupport.Git(t, f.repo, "rev-parse", res.Commit+"^{tree}"); got != want {
		t.Fatalf("the patch on the base gives %s, the commit has %s", got, want)
	}
	// A different result does not overwrite the branch without Force.
	write(t, filepath.Join(f.dir, "later.txt"), "later\n", 0o644)
	if _, err := workspace.Export(context.Background(), f.scan(t, workspace.Limits{}), opts); !errors.Is(err, workspace.ErrBranchExists) {
		t.Fatalf("second export: %v, want ErrBranchExists", err)
	}
}

func openSeesTheSameChanges(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	want := agentEdits(t, f.dir)
	ws, err := p.Open(context.Background(), f.dir, f.stateDir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	cs, err := ws.Scan(context.Background(), workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sameSummary(t, summary(cs), want)
}

func hostileEntriesAreRefused(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	secret := filepath.Join(f.outsideTheTree, "secret")
	mustLink := func(target, link string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(secret, filepath.Join(f.dir, "abs"))
	mustLink("../host/secret", filepath.Join(f.dir, "rel"))
	mustLink(f.outsideTheTree, filepath.Join(f.dir, "hostdir"))
	if err := unix.Mkfifo(filepath.Join(f.dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(f.dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.dir, "sub", ".git", "config"), "[core]\n", 0o644)
	write(t, filepath.Join(f.dir, ".GIT", "HEAD"), "x\n", 0o644)
	write(t, filepath.Join(f.dir, "ok.txt"), "fine\n", 0o644)

	cs := f.scan(t, workspace.Limits{})
	r := refused(cs)
	for _, p := range []string{"abs", "rel", "hostdir", "fifo", "hardlink", "sub/.git", ".GIT"} {
		if r[p] == "" {
			t.Errorf("%s not refused (refused: %v)", p, r)
		}
	}
	sameSummary(t, summary(cs), map[string]string{"ok.txt": "add 100644"})
	for _, c := range cs.Changes {
		if bytes.Contains(c.Content, []byte(f.outsideFileData)) {
			t.Fatalf("host content read into %s", c.Path)
		}
	}
}

func limits(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	write(t, filepath.Join(f.dir, "big.bin"), strings.Repeat("b", 2048), 0o644)
	for i := range 5 {
		write(t, filepath.Join(f.dir, "many", fmt.Sprint(i)), "x", 0o644)
	}
	cs := f.scan(t, workspace.Limits{MaxFile: 1024})
	if refused(cs)["big.bin"] == "" {
		t.Fatalf("a file over MaxFile was not refused: %v", cs.Refused)
	}
	if _, err := f.ws.Scan(context.Background(), workspace.Limits{MaxFiles: 3}); !errors.Is(err, workspace.ErrTooLarge) {
		t.Fatalf("over MaxFiles: %v, want ErrTooLarge", err)
	}
	if _, err := f.ws.Scan(context.Background(), workspace.Limits{MaxBytes: 1500, MaxFile: 1500}); err != nil {
		t.Fatalf("a refused big file must not count: %v", err)
	}
	if _, err := f.ws.Scan(context.Background(), workspace.Limits{MaxBytes: 2050}); !errors.Is(err, workspace.ErrTooLarge) {
		t.Fatalf("over MaxBytes: %v, want ErrTooLarge", err)
	}
}

func ignoredUntrackedPaths(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	write(t, filepath.Join(f.dir, ".gitignore"), "build/\n*.o\n", 0o644)
	write(t, filepath.Join(f.dir, "build", "out"), "x", 0o644)
	write(t, filepath.Join(f.dir, "src", "a.o"), "x", 0o644)
	cs := f.scan(t, workspace.Limits{})
	sameSummary(t, summary(cs), map[string]string{".gitignore": "add 100644"})
}
