// Package workspacetest is the conformance suite of the workspace seam:
// every workspace.Provider (the plain checkout, the copy-on-write overlay)
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
// writes. It must never need anything but git and a POSIX file system,
// and for an overlay workspace (workspace.Layered) root, to mount its
// layers as the agent's tree the way a sandbox does.
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
	"github.com/agentrun/agentrun/internal/workspace/overlay"
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
	t.Run("ReplacedAndRemovedTrees", func(t *testing.T) { t.Parallel(); replacedAndRemovedTrees(t, p) })
}

// fixture is a user repository and a workspace made from it. tree is
// where the agent works: dir itself, or for an overlay workspace
// (workspace.Layered) its layers mounted as the sandbox mounts them.
type fixture struct {
	repo, base      string
	dir, stateDir   string
	tree            string
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
	f.ws, f.tree = ws, f.dir
	if l, ok := ws.(workspace.Layered); ok {
		f.tree = mountLayers(t, l, filepath.Join(root, "tree"))
	}
	return f
}

// mountLayers mounts l's layers at dir, as a sandbox would, until the
// test ends. It needs root (the mount is made in the test's own mount
// namespace).
func mountLayers(t *testing.T, l workspace.Layered, dir string) string {
	t.Helper()
	testsupport.Require(t, "root", os.Geteuid() == 0, "mounting the overlay workspace as the agent's tree needs root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := overlay.Mount(l.Layers(), dir); err != nil {
		t.Fatalf("mount the workspace's layers: %v", err)
	}
	t.Cleanup(func() {
		if err := overlay.Unmount(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
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
	if head := testsupport.Git(t, f.tree, "rev-parse", "HEAD"); head != f.base {
		t.Fatalf("workspace HEAD %s, want %s", head, f.base)
	}
	if st := testsupport.Git(t, f.tree, "status", "--porcelain"); st != "" {
		t.Fatalf("fresh workspace is not clean:\n%s", st)
	}
	if b, err := os.ReadFile(filepath.Join(f.tree, "src", "a.go")); err != nil || string(b) != "package src\n\nconst A = 1\n" {
		t.Fatalf("src/a.go = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(f.tree, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Fatalf("run.sh lost its exec bit: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(f.tree, "link")); err != nil || target != "README.md" {
		t.Fatalf("link = %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(f.tree, ".git", "objects", "info", "alternates")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace borrows objects through alternates: %v", err)
	}
	if _, err := p.Create(context.Background(), f.repo, f.base, f.dir, t.TempDir()); err == nil {
		t.Fatal("Create over an existing directory succeeded")
	}
}

func untouchedHasNoChanges(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	// The agent's own git use (status refreshes the index) is not a change.
	testsupport.Git(t, f.tree, "status")
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
	want := agentEdits(t, f.tree)
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
	write(t, filepath.Join(f.tree, "later.txt"), "later\n", 0o644)
	if _, err := workspace.Export(context.Background(), f.scan(t, workspace.Limits{}), opts); !errors.Is(err, workspace.ErrBranchExists) {
		t.Fatalf("second export: %v, want ErrBranchExists", err)
	}
}

func openSeesTheSameChanges(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	want := agentEdits(t, f.tree)
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
	mustLink(secret, filepath.Join(f.tree, "abs"))
	mustLink("../host/secret", filepath.Join(f.tree, "rel"))
	mustLink(f.outsideTheTree, filepath.Join(f.tree, "hostdir"))
	if err := unix.Mkfifo(filepath.Join(f.tree, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(f.tree, "hardlink")); err != nil {
		// No link to a host file can be made through an overlay mount:
		// plant it in the workspace's directory on the host (the upper
		// layer), as an agent that reached it would.
		if !errors.Is(err, unix.EXDEV) || f.tree == f.dir {
			t.Fatal(err)
		}
		if err := os.Link(secret, filepath.Join(f.dir, "hardlink")); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(f.tree, "sub", ".git", "config"), "[core]\n", 0o644)
	write(t, filepath.Join(f.tree, ".GIT", "HEAD"), "x\n", 0o644)
	write(t, filepath.Join(f.tree, "ok.txt"), "fine\n", 0o644)

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
	write(t, filepath.Join(f.tree, "big.bin"), strings.Repeat("b", 2048), 0o644)
	for i := range 5 {
		write(t, filepath.Join(f.tree, "many", fmt.Sprint(i)), "x", 0o644)
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
	write(t, filepath.Join(f.tree, ".gitignore"), "build/\n*.o\n", 0o644)
	write(t, filepath.Join(f.tree, "build", "out"), "x", 0o644)
	write(t, filepath.Join(f.tree, "src", "a.o"), "x", 0o644)
	cs := f.scan(t, workspace.Limits{})
	sameSummary(t, summary(cs), map[string]string{".gitignore": "add 100644"})
}

// replacedAndRemovedTrees: whole directories removed, a file replaced by
// a directory and back, a directory removed and made again with other
// content, a file renamed, and a base file rewritten with its own content.
func replacedAndRemovedTrees(t *testing.T, p workspace.Provider) {
	f := newFixture(t, p)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// src/ goes; src/ comes back holding only c.go.
	must(os.RemoveAll(filepath.Join(f.tree, "src")))
	write(t, filepath.Join(f.tree, "src", "c.go"), "package src\n", 0o644)
	// README.md becomes a directory.
	must(os.Remove(filepath.Join(f.tree, "README.md")))
	write(t, filepath.Join(f.tree, "README.md", "index.md"), "# index\n", 0o644)
	// run.sh is renamed; link stays as it was, rewritten in place.
	must(os.Rename(filepath.Join(f.tree, "run.sh"), filepath.Join(f.tree, "bin-run.sh")))
	must(os.Remove(filepath.Join(f.tree, "link")))
	must(os.Symlink("README.md", filepath.Join(f.tree, "link")))
	cs := f.scan(t, workspace.Limits{})
	sameSummary(t, summary(cs), map[string]string{
		"src/a.go":           "delete 100644",
		"src/b.go":           "delete 100644",
		"src/c.go":           "add 100644",
		"README.md":          "delete 100644",
		"README.md/index.md": "add 100644",
		"run.sh":             "delete 100755",
		"bin-run.sh":         "add 100755",
	})
	res, err := workspace.Export(context.Background(), cs, exportOptions(t, f, "agentrun/trees"))
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	ls := testsupport.Git(t, f.repo, "ls-tree", "-r", "--name-only", res.Commit)
	if want := "README.md/index.md\nbin-run.sh\nlink\nsrc/c.go"; ls != want {
		t.Fatalf("result tree:\n%s\nwant:\n%s", ls, want)
	}
	// A directory turned back into a file: deletes under the directory.
	f = newFixture(t, p)
	must(os.RemoveAll(filepath.Join(f.tree, "src")))
	write(t, filepath.Join(f.tree, "src"), "now a file\n", 0o644)
	sameSummary(t, summary(f.scan(t, workspace.Limits{})), map[string]string{
		"src/a.go": "delete 100644", "src/b.go": "delete 100644", "src": "add 100644",
	})
}
