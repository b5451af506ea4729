package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// Hostile content in an overlay workspace's upper layer. The agent works
// through the mount, where the kernel keeps the markers for itself; these
// tests also plant in the upper layer directly what only something outside
// the mount could put there, and check that the scan reads it by the
// kernel's rules, refuses what it refuses in a plain checkout, and that
// nothing of the host or of the lower layer reaches the export.

// newOverlay makes an overlay workspace of base from repo on its own cache
// and returns it, its upper layer and its layers.
func newOverlay(t testing.TB, repo, base string) (Workspace, string, overlay.Layers) {
	t.Helper()
	root := t.TempDir()
	c := NewLayerCache(filepath.Join(root, "cache"))
	t.Cleanup(c.Wait)
	ws, err := NewOverlay(c).Create(context.Background(), repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	l := ws.(Layered).Layers()
	return ws, ws.Dir(), l
}

// mountTree mounts l at a new directory until the test ends (root only).
func mountTree(t *testing.T, l overlay.Layers) string {
	t.Helper()
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "tree")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := overlay.Mount(l, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = overlay.Unmount(dir) })
	return dir
}

// treeDigest sums every path, mode, link target and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel + "\x00" + fi.Mode().String() + "\x00"))
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			h.Write([]byte(target))
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestAttackOverlayLowerNeverWritten(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, upper, l := newOverlay(t, repo, base)
	before := treeDigest(t, l.Lower)
	tree := mountTree(t, l)
	// The agent rewrites, deletes, renames, chmods and links base files,
	// the repository's own .git among them, and runs git.
	writeFile(t, filepath.Join(tree, "README.md"), "rewritten\n", 0o644)
	if err := os.Remove(filepath.Join(tree, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(tree, "src", "util.go"), filepath.Join(tree, "util.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(tree, "src", "main.go"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(tree, "scripts", "run.sh"), filepath.Join(tree, "run-link")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tree, ".git", "config"), "[core]\n\tfsmonitor = /bin/false\n", 0o644)
	if err := os.RemoveAll(filepath.Join(tree, "scripts")); err != nil {
		t.Fatal(err)
	}
	testsupport.Git(t, tree, "add", "-A")
	testsupport.Git(t, tree, "-c", "core.fsmonitor=false", "commit", "-q", "-m", "agent")
	if after := treeDigest(t, l.Lower); after != before {
		t.Fatal("the lower layer changed under the agent's writes")
	}
	cs := scanWS(t, ws, Limits{})
	got := kinds(cs)
	for p, want := range map[string]string{"README.md": "modify 100644", "notes.txt": "delete 100644",
		"src/util.go": "delete 100644", "util.go": "add 100644", "src/main.go": "modify 100755",
		"scripts/run.sh": "delete 100755", "run-link": "add 100755"} {
		if got[p] != want {
			t.Errorf("%s: %q, want %q (all: %v)", p, got[p], want, got)
		}
	}
	// The hard link's other name went with scripts/: run-link is a file
	// of its own now.
	if len(cs.Refused) != 0 {
		t.Errorf("refused %v", cs.Refused)
	}
	if _, err := os.Stat(filepath.Join(upper, ".git", "config")); err != nil {
		t.Errorf("the agent's .git/config is not in the upper layer: %v", err)
	}
}

func TestAttackOverlayPlantedMarkers(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, upper, _ := newOverlay(t, repo, base)
	mkdir := func(p string) string {
		t.Helper()
		d := filepath.Join(upper, p)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	setx := func(p, name, val string) {
		t.Helper()
		if err := unix.Lsetxattr(p, name, []byte(val), 0); err != nil {
			requireCap(t, false, "set "+name+": "+err.Error())
		}
	}
	// A real opaque marker on src/: the base's src/ files are gone.
	setx(mkdir("src"), overlay.OpaqueXattr, "y")
	writeFile(t, filepath.Join(upper, "src", "new.go"), "package main\n", 0o644)
	// Markers the kernel does not honour under userxattr are not honoured
	// either: what an agent gets through the mount (escaped), another
	// value, the trusted namespace (root only).
	setx(mkdir("scripts"), "user.overlay.overlay.opaque", "y")
	setx(upper, overlay.OpaqueXattr, "y") // the root is never opaque
	if os.Geteuid() == 0 {
		setx(filepath.Join(upper, "scripts"), "trusted.overlay.opaque", "y")
	}
	// Redirect and metacopy markers are not followed: the content is the
	// upper file's own bytes.
	writeFile(t, filepath.Join(upper, "README.md"), "upper bytes\n", 0o644)
	setx(filepath.Join(upper, "README.md"), "user.overlay.metacopy", "")
	setx(filepath.Join(upper, "README.md"), "user.overlay.redirect", "/etc/passwd")
	d := mkdir("docs")
	setx(d, "user.overlay.redirect", "/src")
	writeFile(t, filepath.Join(d, "a.md"), "docs\n", 0o644)
	// Whiteouts: a base file, a base directory, an untracked path, the
	// workspace's .git (skipped), and a ".." lookalike path (no such base
	// entry). Only root may make them outside the mount.
	if os.Geteuid() == 0 {
		for _, p := range []string{"notes.txt", "nothing-here", ".git", "x..y"} {
			if err := unix.Mknod(filepath.Join(upper, p), unix.S_IFCHR, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs := scanWS(t, ws, Limits{})
	want := map[string]string{
		"src/main.go": "delete 100644", "src/util.go": "delete 100644", "src/new.go": "add 100644",
		"README.md": "modify 100644", "docs/a.md": "add 100644",
	}
	if os.Geteuid() == 0 {
		want["notes.txt"] = "delete 100644"
	}
	got := kinds(cs)
	if len(got) != len(want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	if len(cs.Refused) != 0 {
		t.Errorf("refused %v", cs.Refused)
	}
	for _, c := range cs.Changes {
		if c.Path == "README.md" && string(c.Content) != "upper bytes\n" {
			t.Errorf("README.md exported %q", c.Content)
		}
	}
	if _, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/markers")); err != nil {
		t.Fatal(err)
	}
}

func TestAttackOverlaySpecialFilesAndLinks(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, upper, l := newOverlay(t, repo, base)
	host := t.TempDir()
	secret := "TOP-SECRET-host-content"
	writeFile(t, filepath.Join(host, "secret"), secret, 0o644)
	// Links into the lower layer and out of the workspace, by absolute
	// and relative paths, a file and a directory.
	mustSymlink(t, filepath.Join(l.Lower, "notes.txt"), filepath.Join(upper, "to-lower"))
	rel, err := filepath.Rel(upper, filepath.Join(l.Lower, "src"))
	if err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, rel, filepath.Join(upper, "to-lower-rel"))
	mustSymlink(t, filepath.Join(host, "secret"), filepath.Join(upper, "abs"))
	// A base directory replaced by an escaping link keeps its base.
	mustSymlink(t, host, filepath.Join(upper, "scripts"))
	// Hard links: to a host file, to a lower-layer file, between two
	// upper files.
	if err := os.Link(filepath.Join(host, "secret"), filepath.Join(upper, "hard-host")); err != nil {
		requireCap(t, false, "cannot hard-link across the temp directories: "+err.Error())
	}
	if err := os.Link(filepath.Join(l.Lower, "README.md"), filepath.Join(upper, "README.md")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(upper, "one"), "x\n", 0o644)
	if err := os.Link(filepath.Join(upper, "one"), filepath.Join(upper, "two")); err != nil {
		t.Fatal(err)
	}
	// A FIFO over a base file, and device nodes (root).
	if err := unix.Mkfifo(filepath.Join(upper, "notes.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefused := []string{"to-lower", "to-lower-rel", "abs", "scripts", "hard-host", "README.md", "one", "two", "notes.txt"}
	if os.Geteuid() == 0 {
		for name, dev := range map[string]uint64{"zero": unix.Mkdev(1, 5), "null": unix.Mkdev(1, 3)} {
			if err := unix.Mknod(filepath.Join(upper, name), unix.S_IFCHR|0o644, int(dev)); err != nil {
				t.Fatal(err)
			}
			wantRefused = append(wantRefused, name)
		}
		if err := unix.Mknod(filepath.Join(upper, "block"), unix.S_IFBLK|0o644, int(unix.Mkdev(7, 0))); err != nil {
			t.Fatal(err)
		}
		wantRefused = append(wantRefused, "block")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := ws.Scan(ctx, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	r := refusedPaths(cs)
	for _, p := range wantRefused {
		if r[p] == "" {
			t.Errorf("%s not refused (refused: %v)", p, r)
		}
	}
	if len(cs.Changes) != 0 {
		t.Fatalf("changes %v: every planted entry is refused, and a refused base path keeps its base", kinds(cs))
	}
	for _, c := range cs.Changes {
		if bytes.Contains(c.Content, []byte(secret)) {
			t.Fatalf("host content in %s", c.Path)
		}
	}
}

func TestAttackOverlayGitKnobsNeverRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	ws, upper, l := newOverlay(t, repo, base)
	tree := mountTree(t, l)
	traps := t.TempDir()
	mFSMon := filepath.Join(traps, "PWNED-fsmonitor")
	mHook := filepath.Join(traps, "PWNED-hook")
	evil := markerScript(t, traps, "fsmon.sh", mFSMon)
	writeFile(t, filepath.Join(tree, ".git", "config"), "[core]\n\tfsmonitor = "+evil+"\n\thooksPath = .git/hooks\n", 0o644)
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-index-change"} {
		writeFile(t, filepath.Join(tree, ".git", "hooks", h), "#!/bin/sh\ntouch '"+mHook+"'\n", 0o755)
	}
	writeFile(t, filepath.Join(tree, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
	writeFile(t, filepath.Join(tree, "README.md"), "changed by the agent\n", 0o644)
	// The trap is real: git run in the merged tree, or in the upper
	// layer, fires it.
	userGit(t, tree, "status")
	if _, err := os.Stat(mFSMon); err != nil {
		t.Fatalf("control: the fsmonitor trap did not fire in the tree: %v", err)
	}
	for _, m := range []string{mFSMon, mHook} {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	cs := scanWS(t, ws, Limits{})
	if got := kinds(cs); len(got) != 2 || got["README.md"] != "modify 100644" || got[".gitattributes"] != "add 100644" {
		t.Fatalf("changes = %v", got)
	}
	if _, err := Export(ctx, cs, exportOpts(t, repo, base, "agentrun/overlay-knobs")); err != nil {
		t.Fatal(err)
	}
	noMarkers(t, mFSMon, mHook)
	if _, err := os.Stat(filepath.Join(upper, ".git", "hooks", "pre-commit")); err != nil {
		t.Fatalf("the planted hook is not in the upper layer: %v", err)
	}
}
