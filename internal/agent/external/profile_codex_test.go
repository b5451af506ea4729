package external

import (
	"bytes"
	"context"
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

// codexRun is one bare run of the real codex CLI against srv.
type codexRun struct {
	out, errOut string
	took        time.Duration
}

// runCodex launches codex as the sandbox would (same command, env and HOME
// files), but bare: cwd dir, HOME home, only PATH/HOME/LANG/TERM/TMPDIR
// from here.
func runCodex(t *testing.T, bin string, srv *modelserver.Server, dir, home string, resume bool, task string) codexRun {
	t.Helper()
	l := codexProfile.Launch(LaunchInput{
		Binary: bin, BaseURL: srv.URL + "/openai", Key: srv.Key, Model: srv.Model,
		Home: home, WorkDir: dir, Resume: resume,
	})
	for rel, content := range l.Files {
		p := filepath.Join(home, filepath.FromSlash(rel))
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
	cmd.Dir = dir
	tmp := t.TempDir()
	cmd.Env = append([]string{
		"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin:/usr/local/bin",
		"HOME=" + home, "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" + tmp,
	}, l.Env...)
	cmd.Stdin = strings.NewReader(task)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := codexRun{out: stdout.String(), errOut: stderr.String(), took: time.Since(start)}
	if err != nil {
		t.Fatalf("codex: %v\ncommand: %s\nstdout:\n%s\nstderr:\n%s", err, l.Command, r.out, r.errOut)
	}
	return r
}

// checkCodexRequests asserts every request was a model request with the
// key, and returns the Responses requests.
func checkCodexRequests(t *testing.T, srv *modelserver.Server) []modelserver.Request {
	t.Helper()
	for _, r := range srv.Requests() {
		if r.Key != srv.Key {
			t.Errorf("%s %s carried key %q, want the server's", r.Method, r.Path, r.Key)
		}
		if r.Protocol == modelserver.Other {
			t.Errorf("unexpected request %s %s", r.Method, r.Path)
		}
	}
	reqs := srv.ModelRequests(modelserver.Responses)
	if len(reqs) == 0 {
		t.Fatalf("no Responses request reached the server; all: %v", srv.Requests())
	}
	return reqs
}

func TestCodexProfileWritesFile(t *testing.T) {
	bin := agenttest.CLI(t, "codex", "codex")
	const content = "hello from the model\n"
	// The default model: codex offers it one code-mode tool, "exec" (JavaScript
	// calling nested tools such as apply_patch), in the "additional_tools"
	// input item of its Responses "lite" requests.
	srv := modelserver.New(t, "sk-test-codex", codexDefaultModel, modelserver.ShellWriteFile("hello.txt", content))
	dir, _ := testsupport.Repo(t, nil)
	home := t.TempDir()
	r := runCodex(t, bin, srv, dir, home, false, "Write hello.txt")
	t.Logf("codex took %v", r.took)
	got, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	if err != nil || string(got) != content {
		t.Fatalf("hello.txt = %q, %v; want %q\nstdout:\n%s\nstderr:\n%s", got, err, content, r.out, r.errOut)
	}
	reqs := checkCodexRequests(t, srv)
	if len(reqs) < 2 {
		t.Errorf("%d Responses requests, want the call and the answer after its result", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), `"type":"additional_tools"`) || !strings.Contains(string(reqs[1].Body), `"type":"custom_tool_call_output"`) {
		t.Errorf("codex did not use its code-mode exec tool (additional_tools, custom_tool_call_output)")
	}
	if !strings.Contains(r.out, "hello.txt is written") {
		t.Errorf("stdout lacks the final answer:\n%s", r.out)
	}
	if _, err := os.Stat(filepath.Join(home, ".codex", "shell_snapshots")); err == nil {
		ents, _ := os.ReadDir(filepath.Join(home, ".codex", "shell_snapshots"))
		if len(ents) > 0 {
			t.Errorf("codex wrote shell snapshots (which hold the environment): %v", ents)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != ".git" && e.Name() != "hello.txt" {
			t.Errorf("codex left %s in the workspace", e.Name())
		}
	}
}

func TestCodexProfileShell(t *testing.T) {
	bin := agenttest.CLI(t, "codex", "codex")
	const content = "written by the shell\n"
	// The command writes the file only when it cannot see the key.
	command := `if [ -n "${` + codexKeyEnv + `:-}" ]; then echo key-visible > hello.txt; else printf '%s\n' 'written by the shell' > hello.txt; fi`
	script := func(turn modelserver.Turn) modelserver.Reply {
		if turn.ToolResults == 0 {
			if c, ok := modelserver.ShellCall(turn.Tools, command); ok {
				return modelserver.Reply{Calls: []modelserver.Call{c}}
			}
		}
		return modelserver.Reply{Text: "Done."}
	}
	// A model codex has no metadata for: it gets the classic function tools
	// (exec_command ...) in "tools".
	srv := modelserver.New(t, "sk-test-codex", "gpt-test", script)
	dir, _ := testsupport.Repo(t, nil)
	home := t.TempDir()
	r := runCodex(t, bin, srv, dir, home, false, "Write hello.txt")
	t.Logf("codex took %v", r.took)
	got, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	if err != nil || string(got) != content {
		t.Fatalf("hello.txt = %q, %v; want %q\nstdout:\n%s\nstderr:\n%s", got, err, content, r.out, r.errOut)
	}
	reqs := checkCodexRequests(t, srv)
	if !strings.Contains(string(reqs[0].Body), `"name":"exec_command"`) {
		t.Errorf("the first request offers no exec_command function tool")
	}
}

func TestCodexProfileResume(t *testing.T) {
	bin := agenttest.CLI(t, "codex", "codex")
	srv := modelserver.New(t, "sk-test-codex", codexDefaultModel, modelserver.ShellWriteFile("hello.txt", "one\n"))
	dir, _ := testsupport.Repo(t, nil)
	home := t.TempDir()
	r1 := runCodex(t, bin, srv, dir, home, false, "Write hello.txt")
	first := len(checkCodexRequests(t, srv))
	srv.SetScript(modelserver.Text("Resumed and done."))
	r2 := runCodex(t, bin, srv, dir, home, true, "Now say you are done")
	t.Logf("codex took %v, resumed run %v", r1.took, r2.took)
	reqs := checkCodexRequests(t, srv)
	if len(reqs) <= first {
		t.Fatalf("the resumed run made no model request")
	}
	last := string(reqs[len(reqs)-1].Body)
	for _, want := range []string{"Write hello.txt", "Now say you are done", "hello.txt is written", "*** Add File: hello.txt"} {
		if !strings.Contains(last, want) {
			t.Errorf("the resumed request lacks %q (the earlier conversation)", want)
		}
	}
	if !strings.Contains(r2.out, "Resumed and done.") {
		t.Errorf("resumed stdout lacks the answer:\n%s", r2.out)
	}
}

func TestCodexLaunch(t *testing.T) {
	l := codexProfile.Launch(LaunchInput{Binary: "/opt/x y/codex", BaseURL: "http://127.0.0.1:3129/openai", Key: "ph-key",
		Home: "/home/u", WorkDir: "/workspace"})
	if !strings.HasPrefix(l.Command, `'/opt/x y/codex' exec `) || !strings.HasSuffix(l.Command, " -") {
		t.Errorf("command %q", l.Command)
	}
	for _, want := range []string{"--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-m 'gpt-6.2-sol'"} {
		if !strings.Contains(l.Command, want) {
			t.Errorf("command %q lacks %q", l.Command, want)
		}
	}
	cfg := l.Files[".codex/config.toml"]
	for _, want := range []string{`base_url = "http://127.0.0.1:3129/openai/v1"`, `wire_api = "responses"`,
		`env_key = "OPENAI_API_KEY"`, "check_for_update_on_startup = false", "shell_snapshot = false"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if !strings.Contains(strings.Join(l.Env, "\n"), "OPENAI_API_KEY=ph-key") {
		t.Errorf("env %v lacks the key", l.Env)
	}
	r := codexProfile.Launch(LaunchInput{Binary: "codex", Resume: true, Model: "m",
		Session: "0199a213-81c0-7800-8aa1-bbab2a035a53"})
	if r.Command != `'codex' exec resume --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check -m 'm' --last --all -` {
		t.Errorf("resume command %q", r.Command)
	}
}
