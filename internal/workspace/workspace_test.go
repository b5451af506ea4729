package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestCreateIsStandaloneCheckout(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	_, dir := newWorkspace(t, repo, base)

	// Tools inside work: HEAD is the base, status is clean, diff works.
	if got := testsupport.Git(t, dir, "rev-parse", "HEAD"); got != base {
		t.Fatalf("HEAD = %s, want %s", got, base)
	}
	if st := testsupport.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("fresh workspace not clean:\n%s", st)
	}
	writeFile(t, filepath.Join(dir, "notes.txt"), "changed\n", 0o644)
	if d := testsupport.Git(t, dir, "diff", "--stat"); !strings.Contains(d, "notes.txt") {
		t.Fatalf("git diff in workspace: %q", d)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "readme-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("symlink not checked out as a symlink: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "scripts", "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Fatalf("exec bit lost: %v", err)
	}

	// No sharing with the user's object store: no alternates, no hard links.
	if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "info", "alternates")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("alternates file present: %v", err)
	}
	err := filepath.Walk(filepath.Join(dir, ".git", "objects"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Nlink != 1 {
			t.Errorf("%s has %d links", p, st.Nlink)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Only the base commit was copied, not its history.
	writeFile(t, filepath.Join(repo, "second.txt"), "2\n", 0o644)
	testsupport.Git(t, repo, "add", "second.txt")
	testsupport.Git(t, repo, "commit", "-q", "-m", "second")
	base2 := testsupport.Git(t, repo, "rev-parse", "HEAD")
	_, dir2 := newWorkspace(t, repo, base2)
	if n := testsupport.Git(t, dir2, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("workspace history has %s commits, want 1 (shallow)", n)
	}
	if err := testsupport.GitCmd(t, dir2, "cat-file", "-e", base+"^{commit}").Run(); err == nil {
		t.Fatal("parent commit copied into the workspace")
	}
}

func TestCreateRefusesExistingDirAndInsideState(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	root := t.TempDir()
	p := NewCheckout()
	if _, err := p.Create(context.Background(), repo, base, root, filepath.Join(t.TempDir(), "s")); err == nil {
		t.Fatal("Create into an existing directory succeeded")
	}
	ws := filepath.Join(root, "ws")
	if _, err := p.Create(context.Background(), repo, base, ws, filepath.Join(ws, "state")); err == nil {
		t.Fatal("Create with the state directory inside the workspace succeeded")
	}
	if _, err := p.Create(context.Background(), repo, "HEAD", filepath.Join(root, "ws2"), filepath.Join(root, "s2")); err == nil {
		t.Fatal("Create with a symbolic ref succeeded; want a full commit id")
	}
}

func TestScanNoChanges(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	// Touching files without changing them (new ctime, same bytes) is not
	// a change.
	now := time.Now()
	for _, f := range []string{"README.md", "src/main.go"} {
		if err := os.Chtimes(filepath.Join(dir, f), now, now); err != nil {
			t.Fatal(err)
		}
	}
	cs := scanWS(t, ws, Limits{})
	if len(cs.Changes) != 0 || len(cs.Refused) != 0 {
		t.Fatalf("changes on an untouched workspace: %+v", cs)
	}
	_, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/none"))
	if !errors.Is(err, ErrNoChanges) {
		t.Fatalf("Export of nothing: %v, want ErrNoChanges", err)
	}
	if _, ok, _ := mustRepo(t, repo).BranchTip(context.Background(), "agentrun/none"); ok {
		t.Fatal("branch created for an empty export")
	}
}

func TestScanSeesForgedTimes(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	p := filepath.Join(dir, "notes.txt")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, mtime put back: only ctime (which the agent cannot set)
	// tells.
	writeFile(t, p, "SOME NOTES\n", 0o644)
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	cs := scanWS(t, ws, Limits{})
	if got := kinds(cs); got["notes.txt"] != "modify 100644" || len(got) != 1 {
		t.Fatalf("changes = %v, want notes.txt modified", got)
	}
}

func TestScanAfterOpen(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	root := t.TempDir()
	dir, state := filepath.Join(root, "ws"), filepath.Join(root, "state")
	if _, err := NewCheckout().Create(context.Background(), repo, base, dir, state); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "new.txt"), "new\n", 0o644)
	ws, err := NewCheckout().Open(context.Background(), dir, state)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(scanWS(t, ws, Limits{})); got["new.txt"] != "add 100644" || len(got) != 1 {
		t.Fatalf("changes after Open = %v", got)
	}
	if _, err := NewCheckout().Open(context.Background(), dir, t.TempDir()); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("Open without manifest: %v, want ErrNoManifest", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			roundTrip(t, format)
		})
	}
}

func roundTrip(t *testing.T, format string) {
	ctx := context.Background()
	repo, base := newRepo(t, "--object-format="+format)
	ws, dir := newWorkspace(t, repo, base)

	binary := []byte{0, 1, 2, 0xff, 0xfe, 0, '\n', 0x80}
	writeFile(t, filepath.Join(dir, "README.md"), "# project\n\nline two changed\nline three\n", 0o644) // modify
	writeFile(t, filepath.Join(dir, "deep", "new", "dir", "file.txt"), "nested\n", 0o644)               // add in new dirs
	writeFile(t, filepath.Join(dir, "data.bin"), string(binary), 0o644)                                 // binary
	if err := os.Remove(filepath.Join(dir, "src", "main.go")); err != nil {                             // delete
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "notes.txt"), 0o755); err != nil { // exec bit
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "src", "util.go"), filepath.Join(dir, "src", "helper.go")); err != nil { // rename
		t.Fatal(err)
	}
	if err := os.Symlink("../README.md", filepath.Join(dir, "deep", "readme")); err != nil { // symlink inside
		t.Fatal(err)
	}

	cs := scanWS(t, ws, Limits{})
	want := map[string]string{
		"README.md":             "modify 100644",
		"deep/new/dir/file.txt": "add 100644",
		"data.bin":              "add 100644",
		"src/main.go":           "delete 100644",
		"notes.txt":             "modify 100755",
		"src/util.go":           "delete 100644",
		"src/helper.go":         "add 100644",
		"deep/readme":           "add 120000",
	}
	got := kinds(cs)
	for _, k := range sortedKeys(want) {
		if got[k] != want[k] {
			t.Errorf("%s: got %q, want %q", k, got[k], want[k])
		}
	}
	if len(got) != len(want) || len(cs.Refused) != 0 {
		t.Fatalf("changes = %v, refused = %v", got, cs.Refused)
	}

	opts := exportOpts(t, repo, base, "agentrun/abc1234567")
	res, err := Export(ctx, cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Branch != opts.Branch || res.Patch != opts.PatchPath {
		t.Fatalf("result = %+v", res)
	}
	if tip := testsupport.Git(t, repo, "rev-parse", "refs/heads/"+opts.Branch); tip != res.Commit {
		t.Fatalf("branch at %s, result commit %s", tip, res.Commit)
	}
	if parent := testsupport.Git(t, repo, "rev-parse", res.Commit+"^"); parent != base {
		t.Fatalf("parent = %s, want base %s", parent, base)
	}
	if n := testsupport.Git(t, repo, "rev-list", "--count", "--parents", res.Commit+"^@"); n != "1" {
		t.Fatalf("result commit has other parents: %s", n)
	}
	msg := testsupport.Git(t, repo, "log", "-1", "--format=%B", res.Commit)
	if !strings.HasPrefix(msg, "Fix the thing\n\n") || !strings.Contains(msg, "Agentrun-Run: abc1234567") {
		t.Fatalf("message = %q", msg)
	}
	if tr := testsupport.Git(t, repo, "log", "-1", "--format=%(trailers:key=Agentrun-Run,valueonly)", res.Commit); tr != "abc1234567" {
		t.Fatalf("trailer = %q", tr)
	}
	if who := testsupport.Git(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", res.Commit); who != "Test User <test@example.com>|Test User <test@example.com>" {
		t.Fatalf("identity = %q (want the configured one)", who)
	}
	// The committed content is the workspace's bytes.
	if b, err := testsupport.GitCmd(t, repo, "cat-file", "blob", res.Commit+":data.bin").Output(); err != nil || !bytes.Equal(b, binary) {
		t.Fatalf("binary blob = %v, %v", b, err)
	}
	if m := testsupport.Git(t, repo, "ls-tree", res.Commit, "notes.txt"); !strings.HasPrefix(m, "100755 ") {
		t.Fatalf("notes.txt mode: %s", m)
	}
	if m := testsupport.Git(t, repo, "ls-tree", res.Commit, "deep/readme"); !strings.HasPrefix(m, "120000 ") {
		t.Fatalf("symlink mode: %s", m)
	}
	if res.FilesChanged != 7 || res.Insertions == 0 || res.Deletions == 0 || !strings.Contains(res.Diffstat, "README.md") {
		t.Fatalf("stats = %d files +%d -%d\n%s", res.FilesChanged, res.Insertions, res.Deletions, res.Diffstat)
	}
	// The user's work tree, index and HEAD are untouched.
	if st := testsupport.Git(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("user repo changed:\n%s", st)
	}
	if head := testsupport.Git(t, repo, "rev-parse", "HEAD"); head != base {
		t.Fatal("user HEAD moved")
	}

	// The patch is only the patch, applies cleanly on the base and gives
	// the same tree.
	if patch, err := os.ReadFile(opts.PatchPath); err != nil || !bytes.HasPrefix(patch, []byte("diff --git a/")) {
		t.Fatalf("patch starts %.40q (%v)", patch, err)
	}
	patchGivesCommit(t, repo, base, opts.PatchPath, res.Commit, "--binary")

	// Exporting the same result again is idempotent; a different one is
	// refused without Force, and moves the branch with Force.
	again, err := Export(ctx, cs, opts)
	if err != nil || again.Commit != res.Commit {
		t.Fatalf("re-export: %v, commit %v (want %s)", err, again, res.Commit)
	}
	writeFile(t, filepath.Join(dir, "more.txt"), "more\n", 0o644)
	cs2 := scanWS(t, ws, Limits{})
	if _, err := Export(ctx, cs2, opts); !errors.Is(err, ErrBranchExists) {
		t.Fatalf("export over an existing branch: %v, want ErrBranchExists", err)
	}
	if tip := testsupport.Git(t, repo, "rev-parse", "refs/heads/"+opts.Branch); tip != res.Commit {
		t.Fatal("existing branch overwritten without Force")
	}
	opts.Force = true
	opts.AuthorName, opts.AuthorEmail = "Someone", "someone@example.org"
	res2, err := Export(ctx, cs2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if tip := testsupport.Git(t, repo, "rev-parse", "refs/heads/"+opts.Branch); tip != res2.Commit || res2.Commit == res.Commit {
		t.Fatalf("Force did not move the branch: %s", tip)
	}
	if who := testsupport.Git(t, repo, "log", "-1", "--format=%an <%ae>", res2.Commit); who != "Someone <someone@example.org>" {
		t.Fatalf("author = %q", who)
	}
	if refs := testsupport.Git(t, repo, "for-each-ref", "refs/agentrun-tmp/"); refs != "" {
		t.Fatalf("temporary refs left behind:\n%s", refs)
	}
}

func TestExportFallbackIdentity(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	// A repository-level config without identity wins nothing; empty
	// values fall back to agentrun.
	testsupport.Git(t, repo, "config", "user.name", "")
	testsupport.Git(t, repo, "config", "user.email", "")
	cs := &ChangeSet{Changes: []Change{{Path: "x.txt", Kind: "add", Mode: modeFile, Content: []byte("x\n")}}}
	res, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/ident"))
	if err != nil {
		t.Fatal(err)
	}
	if who := testsupport.Git(t, repo, "log", "-1", "--format=%an <%ae>", res.Commit); who != "agentrun <agentrun@localhost>" {
		t.Fatalf("author = %q", who)
	}
}

func TestExportFileBecomesDirectory(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	// notes.txt becomes a directory; scripts/ becomes a file.
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "notes.txt", "a.txt"), "a\n", 0o644)
	if err := os.RemoveAll(filepath.Join(dir, "scripts")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "scripts"), "now a file\n", 0o644)
	cs := scanWS(t, ws, Limits{})
	res, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/shape"))
	if err != nil {
		t.Fatal(err)
	}
	ls := testsupport.Git(t, repo, "ls-tree", "-r", "--name-only", res.Commit)
	for _, want := range []string{"notes.txt/a.txt", "scripts"} {
		if !strings.Contains("\n"+ls+"\n", "\n"+want+"\n") {
			t.Fatalf("tree lacks %s:\n%s", want, ls)
		}
	}
}

func TestExportRejectsInvalidChangeSet(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	bad := []Change{
		{Path: ".git/config", Kind: "add", Mode: modeFile, Content: []byte("x")},
		{Path: "../x", Kind: "add", Mode: modeFile},
		{Path: "l", Kind: "add", Mode: modeSymlink, Content: []byte("/etc/passwd")},
		{Path: "g", Kind: "add", Mode: modeGitlink, Content: []byte(base)},
		{Path: "k", Kind: "rename", Mode: modeFile},
	}
	for _, c := range bad {
		cs := &ChangeSet{Changes: []Change{c}}
		if _, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/bad")); err == nil {
			t.Errorf("Export accepted %+v", c)
		}
	}
	cs := &ChangeSet{Changes: []Change{{Path: "x", Kind: "add", Mode: modeFile}}}
	for _, branch := range []string{"-f", "--force", "a..b", "refs/heads/x", "a b", ""} {
		if _, err := Export(context.Background(), cs, exportOpts(t, repo, base, branch)); err == nil {
			t.Errorf("Export accepted branch %q", branch)
		}
	}
}

func mustRepo(t testing.TB, dir string) *Repo {
	t.Helper()
	r, err := OpenRepo(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestExportOddNames(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	names := []string{"ünï/файл.txt", "with space.txt", `"quoted".txt`, "a\"b/c", "tab-free #1 & $(x).sh", "日本語/テスト.md"}
	for i, n := range names {
		writeFile(t, filepath.Join(dir, n), strings.Repeat("z", i+1)+"\n", 0o644)
	}
	cs := scanWS(t, ws, Limits{})
	if len(cs.Changes) != len(names) || len(cs.Refused) != 0 {
		t.Fatalf("changes %v refused %v", kinds(cs), cs.Refused)
	}
	opts := exportOpts(t, repo, base, "agentrun/odd")
	res, err := Export(context.Background(), cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		if got := testsupport.Git(t, repo, "cat-file", "blob", res.Commit+":"+n); got != strings.Repeat("z", i+1) {
			t.Errorf("%s = %q", n, got)
		}
	}
	patchGivesCommit(t, repo, base, opts.PatchPath, res.Commit)
}

func TestCancelled(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	writeFile(t, filepath.Join(dir, "x.txt"), "x\n", 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ws.Scan(ctx, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan: %v", err)
	}
	cs := scanWS(t, ws, Limits{})
	if _, err := Export(ctx, cs, exportOpts(t, repo, base, "agentrun/cancel")); err == nil {
		t.Fatal("Export with a cancelled context succeeded")
	}
	if _, ok, _ := mustRepo(t, repo).BranchTip(context.Background(), "agentrun/cancel"); ok {
		t.Fatal("branch created by a cancelled export")
	}
	wsDir := filepath.Join(t.TempDir(), "ws")
	if _, err := NewCheckout().Create(ctx, repo, base, wsDir, t.TempDir()); err == nil {
		t.Fatal("Create with a cancelled context succeeded")
	}
	if _, err := os.Stat(wsDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed Create left %s behind: %v", wsDir, err)
	}
}

func TestScanKeepsBaseLinksAndSubmodules(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	// The user's own repository may hold an escaping link and a submodule.
	if err := os.Symlink("/etc/hostname", filepath.Join(repo, "ext")); err != nil {
		t.Fatal(err)
	}
	testsupport.Git(t, repo, "add", "ext")
	sub := base
	testsupport.Git(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+sub+",mod")
	testsupport.Git(t, repo, "commit", "-q", "-m", "link and submodule")
	base = testsupport.Git(t, repo, "rev-parse", "HEAD")
	ws, dir := newWorkspace(t, repo, base)

	// Touch the link (new ctime): it is read again, found as it was, and
	// neither refused nor changed.
	now := unix.NsecToTimespec(time.Now().UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, "ext"), []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	cs := scanWS(t, ws, Limits{})
	if len(cs.Changes) != 0 || len(cs.Refused) != 0 {
		t.Fatalf("changes %v refused %v", kinds(cs), cs.Refused)
	}
	// Files put in the submodule's directory are refused; the rest exports
	// and the tree keeps the link and the submodule.
	writeFile(t, filepath.Join(dir, "mod", "x.go"), "package x\n", 0o644)
	writeFile(t, filepath.Join(dir, "notes.txt"), "changed\n", 0o644)
	cs = scanWS(t, ws, Limits{})
	if r := refusedPaths(cs); r["mod"] != reasonSubmodule || len(r) != 1 {
		t.Fatalf("refused = %v", r)
	}
	res, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/sub"))
	if err != nil {
		t.Fatal(err)
	}
	ls := testsupport.Git(t, repo, "ls-tree", res.Commit)
	if !strings.Contains(ls, "160000 commit "+sub+"\tmod") || !strings.Contains(ls, "120000 blob") {
		t.Fatalf("tree:\n%s", ls)
	}
}

// TestFill: Fill makes the workspace in an empty directory that already
// exists (a sandbox may have started on it), and refuses anything else.
func TestFill(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	root := t.TempDir()
	f, ok := NewCheckout().(Filler)
	if !ok {
		t.Fatal("the checkout provider is not a Filler")
	}
	dir := filepath.Join(root, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := f.Fill(context.Background(), repo, base, dir, filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "README.md")); err != nil || len(b) == 0 {
		t.Fatalf("README.md not checked out: %v", err)
	}
	if cs := scanWS(t, ws, Limits{}); len(cs.Changes) != 0 {
		t.Fatalf("a fresh workspace has changes: %v", kinds(cs))
	}
	if _, err := f.Fill(context.Background(), repo, base, dir, filepath.Join(root, "state2")); err == nil {
		t.Fatal("Fill into a non-empty directory succeeded")
	}
	if _, err := f.Fill(context.Background(), repo, base, filepath.Join(root, "nope"), filepath.Join(root, "state3")); err == nil {
		t.Fatal("Fill into a missing directory succeeded")
	}
	target := filepath.Join(root, "target")
	_ = os.Mkdir(target, 0o755)
	link := filepath.Join(root, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fill(context.Background(), repo, base, link, filepath.Join(root, "state4")); err == nil {
		t.Fatal("Fill through a symlink succeeded")
	}
	// A failed fill leaves the directory empty.
	bad := filepath.Join(root, "bad")
	_ = os.Mkdir(bad, 0o755)
	if _, err := f.Fill(context.Background(), repo, strings.Repeat("0", 40), bad, filepath.Join(root, "state5")); err == nil {
		t.Fatal("Fill of a missing commit succeeded")
	}
	if names, _ := os.ReadDir(bad); len(names) != 0 {
		t.Fatalf("a failed fill left %d entries", len(names))
	}
}

// An identity the caller already read is not read again: a repository
// identity set since (or never read) does not show, and what the caller
// found empty falls back to agentrun.
func TestExportIdentityRead(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	testsupport.Git(t, repo, "config", "user.name", "Configured")
	testsupport.Git(t, repo, "config", "user.email", "configured@example.org")
	cs := &ChangeSet{Changes: []Change{{Path: "x.txt", Kind: "add", Mode: modeFile, Content: []byte("x\n")}}}
	opts := exportOpts(t, repo, base, "agentrun/identread")
	opts.IdentityRead, opts.AuthorName = true, "Caller"
	res, err := Export(context.Background(), cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if who := testsupport.Git(t, repo, "log", "-1", "--format=%an <%ae>", res.Commit); who != "Caller <agentrun@localhost>" {
		t.Fatalf("author = %q", who)
	}
}
