package testsupport

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitConfig is what every git the tests run gets on its command line, over
// any config file: a fixed identity, no hooks, no signing, main as the
// first branch, and no personal ignore or attributes file (a developer's
// global ignore would otherwise change what a test commits).
var gitConfig = []string{
	"-c", "user.name=Test", "-c", "user.email=test@example.com",
	"-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false",
	"-c", "init.defaultBranch=main",
	"-c", "core.excludesFile=/dev/null", "-c", "core.attributesFile=/dev/null",
}

// Repo makes a git repository in a fresh temporary directory and commits
// files to it (see RepoAt), returning the directory and the commit.
func Repo(t testing.TB, files map[string]string, initArgs ...string) (dir, commit string) {
	t.Helper()
	dir = t.TempDir()
	return dir, RepoAt(t, dir, files, initArgs...)
}

// RepoAt makes dir (created if missing) a git repository on branch main,
// initialized with initArgs (e.g. --object-format=sha256), and commits
// everything in it: files (slash-separated path to content, written 0644,
// directories made as needed) and whatever the caller put there before
// (symlinks, executables). With nothing to commit the commit is empty. It
// returns the commit.
func RepoAt(t testing.TB, dir string, files map[string]string, initArgs ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, append([]string{"init", "-q", "-b", "main"}, initArgs...)...)
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
	return Git(t, dir, "rev-parse", "HEAD")
}

// Git runs git with args in dir, isolated as GitCmd is, fails the test if
// git fails (with what it printed), and returns its standard output
// without surrounding white space.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return GitInput(t, dir, "", args...)
}

// GitInput is Git with stdin as git's standard input (fast-import,
// hash-object --stdin, mktree).
func GitInput(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := GitCmd(t, dir, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s in %s: %v\n%s%s", strings.Join(args, " "), dir, err, stdout.Bytes(), stderr.Bytes())
	}
	return strings.TrimSpace(stdout.String())
}

// GitCmd is git with args in dir for a caller that runs it itself: to see
// its error, to read its output byte for byte, or to keep it running. It
// reads no system or global config (gitConfig stands in for them) and
// inherits no GIT_ variable: a test run from a git hook would otherwise
// inherit GIT_DIR or GIT_INDEX_FILE and work on the wrong repository. It
// requires git on PATH.
func GitCmd(t testing.TB, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Program(t, "git"), append(append([]string{}, gitConfig...), args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return cmd
}
