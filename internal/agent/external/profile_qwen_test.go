package external

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// chatCLIEnv is a bare test of one chat-completions CLI: a temp git repo
// as the workspace, a temp empty HOME.
type chatCLIEnv struct {
	Bin, Repo, Home, Tmp string
}

func newChatCLIEnv(t *testing.T, bin string) chatCLIEnv {
	t.Helper()
	dir := t.TempDir()
	e := chatCLIEnv{Bin: bin, Repo: filepath.Join(dir, "repo"), Home: filepath.Join(dir, "home"), Tmp: filepath.Join(dir, "tmp")}
	for _, d := range []string{e.Repo, e.Home, e.Tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.RepoAt(t, e.Repo, map[string]string{"README.md": "# test repo\n"})
	return e
}

// run launches p's CLI bare with the task on stdin: only PATH (the CLI's
// and node's directories), HOME, LANG, TERM, TMPDIR and Launch.Env.
func (e chatCLIEnv) run(t *testing.T, p Profile, in LaunchInput, task string) (string, time.Duration, error) {
	t.Helper()
	in.Binary, in.WorkDir, in.Home = e.Bin, e.Repo, e.Home
	l := p.Launch(in)
	for name, content := range l.Files {
		if strings.Contains(name, "..") || path.IsAbs(name) {
			t.Fatalf("bad file path %q", name)
		}
		f := filepath.Join(e.Home, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pathDirs := []string{filepath.Dir(e.Bin)}
	if node, err := exec.LookPath("node"); err == nil {
		pathDirs = append(pathDirs, filepath.Dir(node))
	}
	pathDirs = append(pathDirs, "/usr/local/bin", "/usr/bin", "/bin")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", l.Command)
	c.Dir = e.Repo
	c.Env = append([]string{"PATH=" + strings.Join(pathDirs, ":"), "HOME=" + e.Home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + e.Tmp}, l.Env...)
	c.Stdin = strings.NewReader(task)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.WaitDelay = 5 * time.Second
	start := time.Now()
	err := c.Run()
	d := time.Since(start)
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return out.String(), d, err
}

// checkRequests asserts that the server saw model requests, all with its
// key, and nothing it did not know.
func checkChatRequests(t *testing.T, srv *modelserver.Server) {
	t.Helper()
	if len(srv.ModelRequests(modelserver.Chat)) == 0 {
		t.Fatal("no chat completions request reached the server")
	}
	for _, r := range srv.Requests() {
		if r.Key != srv.Key {
			t.Errorf("%s %s carried key %q", r.Method, r.Path, r.Key)
		}
		if r.Protocol == modelserver.Other {
			t.Errorf("unexpected request %s %s", r.Method, r.Path)
		}
	}
}

func logChatRequests(t *testing.T, srv *modelserver.Server) {
	t.Helper()
	for i, r := range srv.Requests() {
		b := string(r.Body)
		if len(b) > 300 {
			b = b[:300] + "..."
		}
		t.Logf("request %d: %s %s %s", i, r.Method, r.Path, b)
	}
}

func TestQwenProfileBare(t *testing.T) {
	bin := agenttest.CLI(t, "qwen", "qwen")
	e := newChatCLIEnv(t, bin)
	const content = "hello from qwen\n"
	srv := modelserver.New(t, "sk-test-qwen-key", "qwen3-coder-plus", modelserver.WriteFileIn(e.Repo, "hello.txt", content))
	const session = "4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
	in := LaunchInput{BaseURL: srv.URL + "/openai", Key: srv.Key, Session: session}
	out, d, err := e.run(t, qwenProfile, in, "Write hello.txt")
	t.Logf("qwen took %v", d)
	if testing.Verbose() {
		logChatRequests(t, srv)
	}
	if err != nil {
		t.Fatalf("qwen: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(e.Repo, "hello.txt")); err != nil || string(b) != content {
		t.Fatalf("hello.txt = %q, %v\n%s", b, err, out)
	}
	checkChatRequests(t, srv)
	if !strings.Contains(out, "Done: hello.txt is written.") {
		t.Errorf("output lacks the model's final text:\n%s", out)
	}

	// Resume by id, then the latest session (--continue): each run's
	// first request holds the earlier conversation.
	srv.SetScript(modelserver.Text("Resumed."))
	for _, tc := range []struct{ task, session string }{{"Say resumed", session}, {"Say continued", ""}} {
		first := len(srv.Requests())
		in.Resume, in.Session = true, tc.session
		out, d, err = e.run(t, qwenProfile, in, tc.task)
		t.Logf("qwen resume (session %q) took %v", tc.session, d)
		if err != nil {
			t.Fatalf("qwen resume: %v\n%s", err, out)
		}
		var resumed bool
		for _, r := range srv.Requests()[first:] {
			if r.Protocol == modelserver.Chat && bytes.Contains(r.Body, []byte("Write hello.txt")) &&
				bytes.Contains(r.Body, []byte(tc.task)) && bytes.Contains(r.Body, []byte("Successfully created")) {
				resumed = true
			}
		}
		if !resumed {
			logChatRequests(t, srv)
			t.Fatalf("the resumed run's requests lack the earlier conversation\n%s", out)
		}
	}
}
