package workspace

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// Each test acts as a hostile agent in the workspace, then runs Scan and
// Export as the host would, and checks that nothing ran or leaked.

func TestAttackWorkspaceGitConfigAndHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	traps := t.TempDir()
	mFSMon := filepath.Join(traps, "PWNED-fsmonitor")
	mHook := filepath.Join(traps, "PWNED-hook")

	// The agent arms its workspace repository.
	evil := markerScript(t, traps, "fsmon.sh", mFSMon)
	cfg, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = cfg.WriteString("[core]\n\tfsmonitor = " + evil + "\n\thooksPath = .git/hooks\n")
	_ = cfg.Close()
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-checkout", "post-index-change"} {
		writeFile(t, filepath.Join(dir, ".git", "hooks", h), "#!/bin/sh\ntouch '"+mHook+"'\n", 0o755)
	}
	writeFile(t, filepath.Join(dir, "README.md"), "changed by the agent\n", 0o644)

	// The trap is real: git run in the workspace would fire it.
	userGit(t, dir, "status")
	if _, err := os.Stat(mFSMon); err != nil {
		t.Fatalf("control: the fsmonitor trap did not fire in the workspace: %v", err)
	}
	// (status may also have fired post-index-change.)
	for _, m := range []string{mFSMon, mHook} {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}

	cs := scanWS(t, ws, Limits{})
	if got := kinds(cs); len(got) != 1 || got["README.md"] != "modify 100644" {
		t.Fatalf("changes = %v (the workspace .git must not be scanned)", got)
	}
	if _, err := Export(ctx, cs, exportOpts(t, repo, base, "agentrun/hooks")); err != nil {
		t.Fatal(err)
	}
	noMarkers(t, mFSMon, mHook)
}

func TestAttackUserRepoHooksAndFSMonitorAreOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	traps := t.TempDir()
	mFSMon := filepath.Join(traps, "PWNED-user-fsmonitor")
	mHook := filepath.Join(traps, "PWNED-user-hook")
	// Hooks and an fsmonitor in the user's own repository must not fire
	// during agentrun's plumbing either.
	evil := markerScript(t, traps, "fsmon.sh", mFSMon)
	testsupport.Git(t, repo, "config", "core.fsmonitor", evil)
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-index-change", "pre-auto-gc"} {
		writeFile(t, filepath.Join(repo, ".git", "hooks", h), "#!/bin/sh\ntouch '"+mHook+"'\n", 0o755)
	}
	writeFile(t, filepath.Join(dir, "notes.txt"), "new notes\n", 0o644)
	r := mustRepo(t, repo)
	if _, err := r.Dirty(ctx); err != nil {
		t.Fatal(err)
	}
	cs := scanWS(t, ws, Limits{})
	res, err := Export(ctx, cs, exportOpts(t, repo, base, "agentrun/userhooks"))
	if err != nil {
		t.Fatal(err)
	}
	tip, _, err := r.BranchTip(ctx, "agentrun/userhooks")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteBranch(ctx, "agentrun/userhooks", tip); err != nil {
		t.Fatal(err)
	}
	noMarkers(t, mFSMon, mHook)
	// Control: plain git in the user's repo does fire them.
	userGit(t, repo, "update-ref", "refs/heads/control", res.Commit)
	if _, err := os.Stat(mHook); err != nil {
		t.Fatalf("control: the user's reference-transaction hook did not fire: %v", err)
	}
}

func TestAttackGitattributesFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	traps := t.TempDir()
	mClean := filepath.Join(traps, "PWNED-clean")
	mSmudge := filepath.Join(traps, "PWNED-smudge")
	mTextconv := filepath.Join(traps, "PWNED-textconv")
	mExtDiff := filepath.Join(traps, "PWNED-extdiff")
	// The user's repository defines the drivers (after its commits, so the
	// setup itself does not fire them) and its work tree names them too.
	testsupport.Git(t, repo, "config", "filter.evil.clean", markerScript(t, traps, "clean.sh", mClean))
	testsupport.Git(t, repo, "config", "filter.evil.smudge", markerScript(t, traps, "smudge.sh", mSmudge))
	testsupport.Git(t, repo, "config", "diff.evil.textconv", markerScript(t, traps, "textconv.sh", mTextconv))
	testsupport.Git(t, repo, "config", "diff.evil.command", markerScript(t, traps, "extdiff.sh", mExtDiff))
	testsupport.Git(t, repo, "config", "diff.external", markerScript(t, traps, "extdiff2.sh", mExtDiff))
	writeFile(t, filepath.Join(repo, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)

	ws, dir := newWorkspace(t, repo, base)
	// The agent names the drivers in its tree.
	writeFile(t, filepath.Join(dir, ".gitattributes"), "* filter=evil diff=evil\n*.txt text eol=crlf\n", 0o644)
	writeFile(t, filepath.Join(dir, "notes.txt"), "line one\nline two\n", 0o644)
	writeFile(t, filepath.Join(dir, "sub", ".gitattributes"), "* filter=evil\n", 0o644)

	cs := scanWS(t, ws, Limits{})
	res, err := Export(ctx, cs, exportOpts(t, repo, base, "agentrun/filters"))
	if err != nil {
		t.Fatal(err)
	}
	noMarkers(t, mClean, mSmudge, mTextconv, mExtDiff)
	// Raw bytes went in: no eol conversion, no clean filter.
	if b, err := testsupport.GitCmd(t, repo, "cat-file", "blob", res.Commit+":notes.txt").Output(); err != nil || !bytes.Equal(b, []byte("line one\nline two\n")) {
		t.Fatalf("blob = %q, %v", b, err)
	}
	// Control: a plain diff with textconv in the user's repo fires the trap.
	userGit(t, repo, "diff", base, res.Commit)
	if _, err := os.Stat(mTextconv); err != nil {
		if _, err2 := os.Stat(mExtDiff); err2 != nil {
			t.Fatalf("control: neither textconv nor external diff fired: %v, %v", err, err2)
		}
	}
}

func TestAttackSymlinkEscapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	host := t.TempDir()
	secret := "TOP-SECRET-host-content"
	writeFile(t, filepath.Join(host, "secret"), secret, 0o644)
	writeFile(t, filepath.Join(host, "dir", "inner"), secret, 0o644)

	mustSymlink(t, filepath.Join(host, "secret"), filepath.Join(dir, "abs-link"))
	// Relative, climbing out: from ws/, ../../.. reaches /.
	mustSymlink(t, "../../../../../../../../"+strings.TrimPrefix(filepath.Join(host, "secret"), "/"), filepath.Join(dir, "rel-link"))
	mustSymlink(t, "../../..", filepath.Join(dir, "src", "up"))
	// A symlinked directory pointing outside, with a file under it.
	mustSymlink(t, filepath.Join(host, "dir"), filepath.Join(dir, "linkdir"))
	mustSymlink(t, "../../"+filepath.Base(host), filepath.Join(dir, "src", "reldir"))
	// '..' after a name: lexically inside, but a chain through another link
	// could climb out; refused by form.
	mustSymlink(t, "..", filepath.Join(dir, "src", "parent"))                 // accepted: the root
	mustSymlink(t, "src/parent/../..", filepath.Join(dir, "chain"))           // refused
	mustSymlink(t, ".git/config", filepath.Join(dir, "to-git"))               // refused
	mustSymlink(t, "../scripts/run.sh", filepath.Join(dir, "src", "ok-link")) // accepted
	// A symlink in place of a git control file.
	mustSymlink(t, "README.md", filepath.Join(dir, ".gitmodules"))
	// An existing base file replaced by an escaping link keeps its base.
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join(host, "secret"), filepath.Join(dir, "notes.txt"))

	cs := scanWS(t, ws, Limits{})
	refused := refusedPaths(cs)
	for _, p := range []string{"abs-link", "rel-link", "src/up", "linkdir", "src/reldir", "chain", "to-git", ".gitmodules", "notes.txt"} {
		if refused[p] == "" {
			t.Errorf("%s not refused (refused: %v)", p, refused)
		}
	}
	got := kinds(cs)
	if len(got) != 2 || got["src/parent"] != "add 120000" || got["src/ok-link"] != "add 120000" {
		t.Fatalf("changes = %v", got)
	}
	for _, c := range cs.Changes {
		if bytes.Contains(c.Content, []byte(secret)) || strings.HasPrefix(c.Path, "linkdir") {
			t.Fatalf("host content or a path under a symlinked directory in %+v", c)
		}
	}
	opts := exportOpts(t, repo, base, "agentrun/links")
	res, err := Export(ctx, cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) != len(cs.Refused) {
		t.Fatalf("result refusals %v", res.Refused)
	}
	patch, err := os.ReadFile(opts.PatchPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(patch, []byte(secret)) || bytes.Contains(patch, []byte("notes.txt")) {
		t.Fatalf("patch leaks host content or drops the refused base file:\n%s", patch)
	}
}

func TestAttackSpecialFiles(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	outside := filepath.Join(t.TempDir(), "host-file")
	writeFile(t, outside, "host private data", 0o644)

	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO in place of a tracked file, too.
	if err := os.Remove(filepath.Join(dir, "src", "main.go")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "src", "main.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	if len(sock) < 100 {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
	}
	if err := os.Link(outside, filepath.Join(dir, "hardlink")); err != nil {
		requireCap(t, false, "cannot hard-link across the temp directories: "+err.Error())
	}
	// A hard link between two workspace files is refused as well.
	if err := os.Link(filepath.Join(dir, "scripts", "run.sh"), filepath.Join(dir, "run-again.sh")); err != nil {
		t.Fatal(err)
	}
	wantRefused := []string{"fifo", "src/main.go", "hardlink", "run-again.sh", "scripts/run.sh"}
	if len(sock) < 100 {
		wantRefused = append(wantRefused, "s.sock")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan *ChangeSet, 1)
	go func() {
		cs, err := ws.Scan(ctx, Limits{})
		if err != nil {
			t.Error(err)
		}
		done <- cs
	}()
	var cs *ChangeSet
	select {
	case cs = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Scan blocked (on the FIFO?)")
	}
	if cs == nil {
		return
	}
	refused := refusedPaths(cs)
	for _, p := range wantRefused {
		if refused[p] == "" {
			t.Errorf("%s not refused (refused: %v)", p, refused)
		}
	}
	if len(cs.Changes) != 0 {
		t.Fatalf("changes = %v; a refused tracked file keeps its base version", kinds(cs))
	}
	if _, err := Export(context.Background(), cs, exportOpts(t, repo, base, "agentrun/special")); !errors.Is(err, ErrNoChanges) {
		t.Fatalf("export: %v, want ErrNoChanges", err)
	}
}

func TestAttackDeviceNode(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	// /dev/zero's numbers: reading it would never end.
	if err := unix.Mknod(filepath.Join(dir, "zero"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
		requireCap(t, false, "mknod: "+err.Error())
	}
	// A device where the scan reads ignore rules, too.
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(dir, "sub", ".gitignore"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
		t.Fatal(err)
	}
	cs := scanWS(t, ws, Limits{})
	r := refusedPaths(cs)
	if r["zero"] != reasonSpecial || r["sub/.gitignore"] != reasonSpecial || len(cs.Changes) != 0 {
		t.Fatalf("device: refused %v, changes %v", cs.Refused, kinds(cs))
	}
}

func TestAttackLimits(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)

	t.Run("file over the per-file cap is refused", func(t *testing.T) {
		t.Parallel()
		ws, dir := newWorkspace(t, repo, base)
		writeFile(t, filepath.Join(dir, "huge.bin"), strings.Repeat("x", 4096), 0o644)
		writeFile(t, filepath.Join(dir, "small.txt"), "ok\n", 0o644)
		cs := scanWS(t, ws, Limits{MaxFile: 1024})
		if refusedPaths(cs)["huge.bin"] != reasonTooLarge {
			t.Fatalf("refused = %v", cs.Refused)
		}
		if got := kinds(cs); len(got) != 1 || got["small.txt"] == "" {
			t.Fatalf("changes = %v", got)
		}
	})
	t.Run("total bytes over the cap fail the scan", func(t *testing.T) {
		t.Parallel()
		ws, dir := newWorkspace(t, repo, base)
		for _, n := range []string{"a", "b", "c"} {
			writeFile(t, filepath.Join(dir, n), strings.Repeat("y", 800), 0o644)
		}
		_, err := ws.Scan(context.Background(), Limits{MaxBytes: 2000, MaxFile: 1000})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("too many files fail the scan", func(t *testing.T) {
		t.Parallel()
		ws, dir := newWorkspace(t, repo, base)
		for i := range 30 {
			writeFile(t, filepath.Join(dir, "many", string(rune('a'+i%26))+strings.Repeat("z", i/26)), "x", 0o644)
		}
		_, err := ws.Scan(context.Background(), Limits{MaxFiles: 20})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("too many refusals fail the scan", func(t *testing.T) {
		t.Parallel()
		ws, dir := newWorkspace(t, repo, base)
		for i := range 30 {
			if err := unix.Mkfifo(filepath.Join(dir, "f"+strings.Repeat("i", i+1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := ws.Scan(context.Background(), Limits{MaxFiles: 20})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
}

func TestAttackGitNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	files := map[string]string{
		"sub/.git/config":                  "[core]\n\tfsmonitor = touch /tmp/x\n",
		"sub/.git/hooks/pre-commit":        "#!/bin/sh\n",
		".GIT/config":                      "[core]\n",
		"src/.Git/HEAD":                    "ref: refs/heads/main\n",
		"x/git~1/config":                   "x",
		"y/.git. /config":                  "x",
		"z/.git::$INDEX_ALLOCATION/config": "x",
		"h/.g\u200cit/config":              "x",
		"bad\\name":                        "x",
		"ctl\x01name":                      "x",
		"nl\nname":                         "x",
		"fine/.github/workflow.yml":        "ok\n",
		"fine/.gitignore":                  "*.o\n",
	}
	for p, c := range files {
		writeFile(t, filepath.Join(dir, p), c, 0o644)
	}
	// Invalid UTF-8 in a name.
	writeFile(t, filepath.Join(dir, "bad\xff\xfe.txt"), "x", 0o644)
	// The workspace's own .git is skipped, not refused.
	writeFile(t, filepath.Join(dir, ".git", "info", "exclude"), "changed\n", 0o644)

	cs := scanWS(t, ws, Limits{})
	refused := refusedPaths(cs)
	for _, p := range []string{"sub/.git", ".GIT", "src/.Git", "x/git~1", "y/.git. ", "z/.git::$INDEX_ALLOCATION", "h/.g\u200cit", "bad\\name", `"ctl\x01name"`, `"nl\nname"`, `"bad\xff\xfe.txt"`} {
		if refused[p] == "" {
			t.Errorf("%q not refused (refused: %q)", p, refused)
		}
	}
	got := kinds(cs)
	if len(got) != 2 || got["fine/.github/workflow.yml"] == "" || got["fine/.gitignore"] == "" {
		t.Fatalf("changes = %v", got)
	}
	res, err := Export(ctx, cs, exportOpts(t, repo, base, "agentrun/names"))
	if err != nil {
		t.Fatal(err)
	}
	ls := testsupport.Git(t, repo, "ls-tree", "-r", "--name-only", res.Commit)
	if strings.Contains(strings.ToLower(ls), ".git/") || strings.Contains(ls, "config") {
		t.Fatalf("tree has a .git path:\n%s", ls)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// userGit runs git in dir as the user would, with the machine's and the
// repository's config, hooks and all (testsupport.Git turns hooks off): the
// controls use it to show that a trap is real.
func userGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
