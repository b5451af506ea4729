package external

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// geminiRun runs the real gemini CLI bare (no sandbox) once with in, the
// task on stdin, and returns its combined output.
func geminiRun(t *testing.T, in LaunchInput, task string) string {
	t.Helper()
	l := geminiProfile.Launch(in)
	for rel, content := range l.Files {
		p := filepath.Join(in.Home, filepath.FromSlash(rel))
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
	cmd.Dir = in.WorkDir
	// On timeout kill the CLI too, not only sh.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	node, err := exec.LookPath("node")
	if err != nil {
		node = "/usr/bin/node"
	}
	path := filepath.Dir(in.Binary) + ":" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin"
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + in.Home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + t.TempDir()}, l.Env...)
	cmd.Stdin = strings.NewReader(task)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("gemini took %s (resume=%v)", time.Since(start).Round(time.Millisecond), in.Resume)
	if err != nil {
		t.Fatalf("gemini: %v\n%s", err, out.String())
	}
	return out.String()
}

func TestGeminiProfileCLI(t *testing.T) {
	bin := agenttest.CLI(t, "gemini", "gemini")
	repo, _ := testsupport.Repo(t, nil)
	home := t.TempDir()
	const content = "hello from the model\n"
	srv := modelserver.New(t, "test-key-gemini", geminiDefaultModel, modelserver.WriteFileIn(repo, "hello.txt", content))
	in := LaunchInput{Binary: bin, BaseURL: srv.URL + "/gemini", Key: srv.Key, WorkDir: repo, Home: home,
		Session: "0b6f3c2e-4d1a-4c8e-9a55-2f7e1c0d9b31"}
	out := geminiRun(t, in, "Write hello.txt")
	t.Logf("output:\n%s", out)

	got, err := os.ReadFile(filepath.Join(repo, "hello.txt"))
	if err != nil || string(got) != content {
		t.Fatalf("hello.txt = %q, %v", got, err)
	}
	checkGeminiRequests(t, srv)
	if ents, _ := os.ReadDir(repo); len(ents) != 2 {
		t.Errorf("the CLI wrote into the workspace: %v", ents)
	}
	first := len(srv.ModelRequests(modelserver.Gemini))

	// Resume: the second run continues the session, so its request holds
	// the first conversation (the task and the tool result).
	srv.SetScript(modelserver.Text("Resumed."))
	in.Resume = true
	out = geminiRun(t, in, "What did you write?")
	if !strings.Contains(out, "Resumed.") {
		t.Fatalf("resumed output lacks the reply:\n%s", out)
	}
	reqs := srv.ModelRequests(modelserver.Gemini)
	if len(reqs) <= first {
		t.Fatal("the resumed run made no model request")
	}
	var main *modelserver.Request
	for i := first; i < len(reqs); i++ {
		if bytes.Contains(reqs[i].Body, []byte("What did you write?")) {
			main = &reqs[i]
		}
	}
	if main == nil {
		t.Fatal("no resumed request carries the new task")
	}
	for _, want := range []string{"Write hello.txt", "functionResponse", "hello.txt"} {
		if !bytes.Contains(main.Body, []byte(want)) {
			t.Errorf("resumed request lacks %q (the earlier conversation)", want)
		}
	}

	// Resume without a session id continues the latest session; a task
	// that starts with "-" is not taken for flags.
	in.Session = ""
	srv.SetScript(modelserver.Text("Latest."))
	if out := geminiRun(t, in, "--version: still there?"); !strings.Contains(out, "Latest.") {
		t.Fatalf("resume latest output lacks the reply:\n%s", out)
	}
	reqs = srv.ModelRequests(modelserver.Gemini)
	last := reqs[len(reqs)-1].Body
	for _, want := range []string{"Write hello.txt", "What did you write?", "--version: still there?"} {
		if !bytes.Contains(last, []byte(want)) {
			t.Errorf("resume latest request lacks %q", want)
		}
	}
	checkGeminiRequests(t, srv)
}

func TestGeminiLaunch(t *testing.T) {
	in := LaunchInput{Binary: "/opt/x y/gemini", BaseURL: "http://127.0.0.1:3129/gemini", Key: "placeholder",
		Home: "/home/agent", WorkDir: "/workspace"}
	l := geminiProfile.Launch(in)
	for _, want := range []string{"'/opt/x y/gemini' ", "--approval-mode yolo", "--model 'gemini-2.5-pro'", `--prompt="$(cat)"`} {
		if !strings.Contains(l.Command, want) {
			t.Errorf("command %q lacks %q", l.Command, want)
		}
	}
	if strings.Contains(l.Command, "--resume") || strings.Contains(l.Command, "--session-id") {
		t.Errorf("fresh run without session: %q", l.Command)
	}
	env := strings.Join(l.Env, "\n")
	for _, want := range []string{"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:3129/gemini\n", "GEMINI_API_KEY=placeholder\n", "GEMINI_CLI_TRUST_WORKSPACE=true"} {
		if !strings.Contains(env+"\n", want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	var settings struct {
		Security struct {
			Auth struct{ SelectedType string }
		}
		Privacy struct{ UsageStatisticsEnabled *bool }
	}
	if err := json.Unmarshal([]byte(l.Files[".gemini/settings.json"]), &settings); err != nil {
		t.Fatalf("settings.json: %v", err)
	}
	if settings.Security.Auth.SelectedType != "gemini-api-key" || settings.Privacy.UsageStatisticsEnabled == nil || *settings.Privacy.UsageStatisticsEnabled {
		t.Errorf("settings = %+v", settings)
	}
	for _, tc := range []struct {
		session string
		resume  bool
		want    string
	}{
		{"abc-1", false, "--session-id 'abc-1'"},
		{"abc-1", true, "--resume 'abc-1'"},
		{"", true, "--resume latest"},
	} {
		in.Session, in.Resume, in.Model = tc.session, tc.resume, "gemini-3-pro-preview"
		if c := geminiProfile.Launch(in).Command; !strings.Contains(c, tc.want) || !strings.Contains(c, "--model 'gemini-3-pro-preview'") {
			t.Errorf("session %q resume %v: %q", tc.session, tc.resume, c)
		}
	}
}

// checkGeminiRequests asserts that every request reached a model
// endpoint with the server's key.
func checkGeminiRequests(t *testing.T, srv *modelserver.Server) {
	t.Helper()
	if len(srv.ModelRequests(modelserver.Gemini)) == 0 {
		t.Fatal("no model request")
	}
	for _, r := range srv.Requests() {
		t.Logf("request %s %s (%d bytes)", r.Method, r.Path, len(r.Body))
		if r.Key != srv.Key {
			t.Errorf("%s %s carried key %q", r.Method, r.Path, r.Key)
		}
		if r.Protocol == modelserver.Other {
			t.Errorf("unexpected request %s %s", r.Method, r.Path)
		}
	}
}
