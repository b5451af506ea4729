package external

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestClaudeProfileLaunch(t *testing.T) {
	in := LaunchInput{Binary: "/opt/x y/claude", BaseURL: "http://127.0.0.1:3129/anthropic", Key: "k-123",
		Home: "/home/agent", WorkDir: "/workspace", Session: "0b7c5a8e-1d2f-4c3b-9a8e-7f6d5c4b3a21"}
	l := claudeProfile.Launch(in)
	for _, want := range []string{`'/opt/x y/claude' -p`, "--dangerously-skip-permissions", "--model '" + claudeDefaultModel + "'",
		"--session-id '" + in.Session + "'"} {
		if !strings.Contains(l.Command, want) {
			t.Errorf("command %q lacks %q", l.Command, want)
		}
	}
	env := strings.Join(l.Env, "\n")
	for _, want := range []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:3129/anthropic\n", "ANTHROPIC_API_KEY=k-123\n", "IS_SANDBOX=1\n"} {
		if !strings.Contains(env+"\n", want) {
			t.Errorf("env lacks %q", want)
		}
	}
	in.Resume, in.Model = true, "local-model"
	l = claudeProfile.Launch(in)
	if !strings.Contains(l.Command, "--resume '"+in.Session+"'") || !strings.Contains(l.Command, "--model 'local-model'") {
		t.Errorf("resume command %q", l.Command)
	}
}

// claudeUUID is a random version-4 UUID (claude wants one for --session-id).
func claudeUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// claudeRun runs the real CLI once, bare, as the sandbox would.
func claudeRun(t *testing.T, bin string, srv *modelserver.Server, repo, home, session string, resume bool, task string) (string, time.Duration) {
	t.Helper()
	l := claudeProfile.Launch(LaunchInput{Binary: bin, BaseURL: srv.URL + "/anthropic", Key: srv.Key, Model: "test-model",
		Home: home, WorkDir: repo, Session: session, Resume: resume})
	for name, content := range l.Files {
		p := filepath.Join(home, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", l.Command)
	cmd.Dir = repo
	cmd.Env = append([]string{"PATH=" + filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home,
		"LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + t.TempDir()}, l.Env...)
	cmd.Stdin = strings.NewReader(task)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		for _, r := range srv.Requests() {
			t.Logf("request %s %s %.300s", r.Method, r.Path, r.Body)
		}
		t.Fatalf("claude: %v (after %v)\nstdout: %s\nstderr: %s", err, took, out.String(), errb.String())
	}
	return out.String(), took
}

func TestClaudeCLI(t *testing.T) {
	bin := agenttest.CLI(t, "claude", "claude")
	repo, _ := testsupport.Repo(t, nil)
	home := t.TempDir()
	const content = "hello from the model\n"
	srv := modelserver.New(t, "sk-ant-test-"+claudeUUID(), "test-model", modelserver.WriteFileIn(repo, "hello.txt", content))
	session := claudeUUID()

	out, took := claudeRun(t, bin, srv, repo, home, session, false, "Write hello.txt")
	t.Logf("claude took %v; stdout: %q", took, out)
	if b, err := os.ReadFile(filepath.Join(repo, "hello.txt")); err != nil || string(b) != content {
		t.Fatalf("hello.txt = %q, %v", b, err)
	}
	if !strings.Contains(out, "Done: hello.txt is written.") {
		t.Errorf("stdout %q lacks the model's final text", out)
	}
	if st := testsupport.Git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "?? hello.txt" {
		t.Errorf("workspace changes %q, want only hello.txt", st)
	}
	first := srv.Requests()
	checkClaudeRequests(t, srv, first)
	var sawWrite bool
	for _, r := range srv.ModelRequests(modelserver.Anthropic) {
		sawWrite = sawWrite || bytes.Contains(r.Body, []byte(`"tool_result"`))
	}
	if !sawWrite {
		t.Error("no request carried the Write tool's result")
	}

	// Resume: the second run continues the session, so its model request
	// holds the first run's conversation.
	srv.SetScript(modelserver.Text("Resumed and done."))
	out, took = claudeRun(t, bin, srv, repo, home, session, true, "Now say done")
	t.Logf("claude --resume took %v; stdout: %q", took, out)
	if !strings.Contains(out, "Resumed and done.") {
		t.Errorf("resume stdout %q", out)
	}
	second := srv.Requests()[len(first):]
	checkClaudeRequests(t, srv, second)
	var continued bool
	for _, r := range second {
		if r.Protocol == modelserver.Anthropic && bytes.Contains(r.Body, []byte("Write hello.txt")) &&
			bytes.Contains(r.Body, []byte("Now say done")) && bytes.Contains(r.Body, []byte(`"tool_result"`)) {
			continued = true
		}
	}
	if !continued {
		t.Error("no resumed request carried the earlier conversation")
	}

	// Resume of a session that was never saved starts it instead.
	srv.SetScript(modelserver.Text("Fresh start."))
	n := len(srv.Requests())
	out, took = claudeRun(t, bin, srv, repo, home, claudeUUID(), true, "Start over")
	t.Logf("claude --resume of an unsaved session took %v; stdout: %q", took, out)
	if !strings.Contains(out, "Fresh start.") {
		t.Errorf("stdout %q", out)
	}
	third := srv.Requests()[n:]
	checkClaudeRequests(t, srv, third)
	for _, r := range third {
		if bytes.Contains(r.Body, []byte("Write hello.txt")) {
			t.Error("a fresh session carried the earlier conversation")
		}
	}
}

// checkClaudeRequests asserts every request carried the key and was one
// the server answers (the model API; nothing else was needed).
func checkClaudeRequests(t *testing.T, srv *modelserver.Server, reqs []modelserver.Request) {
	t.Helper()
	models := 0
	for _, r := range reqs {
		t.Logf("request %s %s (%d bytes)", r.Method, r.Path, len(r.Body))
		if r.Key != srv.Key {
			t.Errorf("request %s %s carried key %q", r.Method, r.Path, r.Key)
		}
		if r.Protocol == modelserver.Other {
			t.Errorf("unexpected request %s %s", r.Method, r.Path)
		}
		if r.Protocol == modelserver.Anthropic {
			models++
			if got := r.Header.Get("x-api-key"); got != srv.Key {
				t.Errorf("x-api-key = %q", got)
			}
		}
	}
	if models == 0 {
		t.Error("no model request reached the server")
	}
}
