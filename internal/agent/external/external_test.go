package external

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
)

// startHost starts a real host-backend sandbox on a fresh workspace.
func startHost(t *testing.T) (sandbox.Sandbox, string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	home := filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := host.New().Start(context.Background(), sandbox.Spec{
		RunID: "testrun000", Workspace: ws, Home: home, StateDir: filepath.Join(dir, "st"),
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	return sb, ws
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func attempt(t *testing.T, ctx context.Context, sb sandbox.Sandbox, cmd, prompt string, env []string) (*agent.Outcome, string) {
	t.Helper()
	a, err := New(run.AgentSpec{Name: CommandName, Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuf
	o, err := a.Attempt(ctx, agent.AttemptInput{N: 1, Prompt: prompt, Runner: sb.Runner(), WorkDir: sb.WorkDir(), Env: env, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	return o, out.String()
}

func TestAttempt(t *testing.T) {
	sb, ws := startHost(t)
	ctx := context.Background()
	t.Run("prompt on stdin, env, output", func(t *testing.T) {
		o, out := attempt(t, ctx, sb, `cat > got.txt; echo "key=$MY_KEY"; echo err >&2`, "the $(task)", []string{"MY_KEY=v1"})
		if o.Reason != run.ReasonCompleted || *o.ExitCode != 0 {
			t.Fatalf("%+v", o)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "got.txt")); string(b) != "the $(task)" {
			t.Fatalf("stdin %q", b)
		}
		if !strings.Contains(out, "key=v1") || !strings.Contains(out, "err") {
			t.Fatalf("output %q", out)
		}
	})
	t.Run("failure", func(t *testing.T) {
		o, _ := attempt(t, ctx, sb, "exit 7", "x", nil)
		if o.Reason != run.ReasonAgentFailed || *o.ExitCode != 7 || !strings.Contains(o.Message, "7") {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		o, _ := attempt(t, cctx, sb, "sleep 30", "x", nil)
		if o.Reason != run.ReasonCancelled {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		o, _ := attempt(t, tctx, sb, "sleep 30", "x", nil)
		if o.Reason != run.ReasonTimeout || time.Since(start) > 10*time.Second {
			t.Fatalf("%+v after %s", o, time.Since(start))
		}
	})
	t.Run("argument profiles keep the task as data", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "pwned")
		task := "`touch " + marker + "` $(touch " + marker + ")"
		o, _ := attempt(t, ctx, sb, `printf '%s' "$(cat)" > arg.txt`, task, nil)
		if o.Reason != run.ReasonCompleted {
			t.Fatalf("%+v", o)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the task was executed")
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "arg.txt")); string(b) != task {
			t.Fatalf("arg %q", b)
		}
	})
}

func TestProfiles(t *testing.T) {
	want := []string{"claude", "codex", "crush", "gemini", "opencode", "qwen"}
	if got := strings.Join(Names(), ","); got != strings.Join(want, ",") {
		t.Fatalf("profiles %s", got)
	}
	for _, p := range Profiles() {
		if p.Binary == "" || p.Install == "" || p.Doc == "" || p.Launch == nil {
			t.Errorf("%s: incomplete profile %+v", p.Name, p)
		}
		switch p.Protocol {
		case "anthropic", "openai", "gemini":
		default:
			t.Errorf("%s: protocol %q", p.Name, p.Protocol)
		}
		l := p.Launch(LaunchInput{Binary: "/opt/x/bin/" + p.Binary, BaseURL: "http://127.0.0.1:3129/" + p.Protocol,
			Key: "agentrun-gateway-TOKEN", Model: "m1", Home: "/home/agent", WorkDir: "/workspace", Session: "0e9a2c1b-5d7e-4f3a-9b1c-2d3e4f5a6b7c"})
		// The only way a profile passes the task as an argument is the
		// quoted "$(cat)" of stdin.
		if strings.Contains(l.Command, "$(") && strings.Count(l.Command, "$(") != strings.Count(l.Command, `"$(cat)"`) {
			t.Errorf("%s: command substitution other than \"$(cat)\": %s", p.Name, l.Command)
		}
		if !strings.Contains(l.Command, "'/opt/x/bin/"+p.Binary+"'") {
			t.Errorf("%s: command does not run the quoted binary: %s", p.Name, l.Command)
		}
		all := l.Command + strings.Join(l.Env, "\n")
		for _, f := range l.Files {
			all += f
		}
		if !strings.Contains(all, "agentrun-gateway-TOKEN") || !strings.Contains(all, "127.0.0.1:3129") {
			t.Errorf("%s: the launch does not point the CLI at the gateway with the placeholder", p.Name)
		}
		for name := range l.Files {
			if strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
				t.Errorf("%s: file %q outside HOME", p.Name, name)
			}
		}
	}
	p, _ := Lookup("claude")
	if len(p.Telemetry) > 0 {
		p.Telemetry[0] = "CHANGED"
		if q, _ := Lookup("claude"); q.Telemetry[0] == "CHANGED" {
			t.Fatal("Lookup shares the table's slices")
		}
	}
	if _, ok := Lookup("nosuch"); ok {
		t.Fatal("unknown profile found")
	}
	if _, err := New(run.AgentSpec{Name: CommandName}); err == nil {
		t.Fatal("empty command accepted")
	}
	if _, err := New(run.AgentSpec{Name: "claude"}); err == nil {
		t.Fatal("a profile without its recorded binary accepted")
	}
}

func TestWriteFilesNeverFollowsLinks(t *testing.T) {
	home := t.TempDir()
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What an agent could leave in its HOME for the next attempt.
	if err := os.Symlink(victim, filepath.Join(home, "settings.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, ".config")); err != nil {
		t.Fatal(err)
	}
	err := writeFiles(home, map[string]string{"settings.json": "new", ".config/app/config.json": "x"})
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the host file behind the link was written: %q", b)
	}
	if _, serr := os.Stat(filepath.Join(outside, "app")); serr == nil {
		t.Fatal("a directory was made through the link")
	}
	if err == nil {
		// Accepted only if the files landed inside HOME.
		if b, _ := os.ReadFile(filepath.Join(home, "settings.json")); string(b) != "new" {
			t.Fatalf("settings.json %q", b)
		}
	}
	if err := writeFiles(home, map[string]string{"../escape": "x"}); err == nil {
		t.Fatal("a path leaving HOME was accepted")
	}
}

// A profile whose CLI on PATH is an npm launcher runs the native program
// submit recorded (agent.Native), with the launcher's variables; once
// that program is gone (the CLI reinstalled otherwise), the launcher; and
// a run recorded before (no launcher) runs what it recorded.
func TestAttemptRunsTheNativeProgram(t *testing.T) {
	prefix, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(prefix, "lib", "node_modules", "@acme", "cli")
	launcher := filepath.Join(root, "bin", "cli.js")
	program := filepath.Join(root, "node_modules", "@acme", "cli-native", "vendor", "target", "bin", "cli")
	for path, content := range map[string]string{
		launcher: "#!/bin/sh\necho launcher \"$CLI_ROOT\" > ran.txt\n",
		program:  "#!/bin/sh\necho native \"$CLI_ROOT\" \"$CLI_BY_NPM\" > ran.txt\n",
		filepath.Join(root, "node_modules", "@acme", "cli-native", "package.json"): "{}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &Profile{Info: agent.Info{Name: "fake", Protocol: "openai", Native: &agent.Native{
		Launcher: "bin/cli.js",
		Targets:  map[string]agent.NativeTarget{runtime.GOOS + "/" + runtime.GOARCH: {Package: "@acme/cli-native", Target: "target"}},
		Program:  "bin/cli", RootEnv: "CLI_ROOT", ManagedEnv: "CLI_BY_NPM",
	}}, Launch: func(in LaunchInput) Launch { return Launch{Command: shellQuote(in.Binary)} }}
	ran := func(spec run.AgentSpec) string {
		t.Helper()
		sb, ws := startHost(t)
		a := &Agent{spec: spec, profile: p}
		var out syncBuf
		o, err := a.Attempt(context.Background(), agent.AttemptInput{N: 1, Prompt: "task", Runner: sb.Runner(), WorkDir: sb.WorkDir(),
			Output: &out, Gateway: &agent.Gateway{URL: "http://127.0.0.1:9", Key: "k", Routes: []string{"openai"}}})
		if err != nil || o.Reason != run.ReasonCompleted {
			t.Fatalf("%+v %v\n%s", o, err, out.String())
		}
		b, _ := os.ReadFile(filepath.Join(ws, "ran.txt"))
		return strings.TrimSpace(string(b))
	}
	// What submit records.
	prog, _, ok := p.Native.Resolve(launcher, runtime.GOOS, runtime.GOARCH)
	if !ok || prog != program {
		t.Fatalf("Resolve = %q, %v", prog, ok)
	}
	if got, want := ran(run.AgentSpec{Name: "fake", Binary: program, Launcher: launcher}), "native "+root+" 1"; got != want {
		t.Fatalf("ran %q, want %q", got, want)
	}
	if got := ran(run.AgentSpec{Name: "fake", Binary: launcher}); got != "launcher" {
		t.Fatalf("a run without a launcher recorded ran %q", got)
	}
	if err := os.Remove(program); err != nil {
		t.Fatal(err)
	}
	if got := ran(run.AgentSpec{Name: "fake", Binary: program, Launcher: launcher}); got != "launcher" {
		t.Fatalf("with the program gone, ran %q", got)
	}
}

// TestOutcomeStopped: an attempt ended from outside says why (a cause
// given with the cancel), a deadline is a timeout, a plain cancel a stop.
func TestOutcomeStopped(t *testing.T) {
	code := 143
	res := &runner.ExecResult{ExitCode: code}
	for _, tc := range []struct {
		cancel func(context.Context) context.Context
		reason run.Reason
		msg    string
	}{
		{func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancelCause(ctx)
			cancel(errors.New("the run's model budget is spent"))
			return ctx
		}, run.ReasonCancelled, "the agent was stopped: the run's model budget is spent"},
		{func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		}, run.ReasonCancelled, "the agent was stopped"},
		{func(ctx context.Context) context.Context {
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, run.ReasonTimeout, "the run's time limit was reached"},
	} {
		out, err := outcome(tc.cancel(context.Background()), res, nil)
		if err != nil || out.Reason != tc.reason || out.Message != tc.msg || out.ExitCode == nil || *out.ExitCode != code {
			t.Errorf("%+v %v, want %s %q", out, err, tc.reason, tc.msg)
		}
	}
}

// TestAttemptPutsHelpersFirstOnPath: the directories of the helpers submit
// recorded (run.AgentSpec.Helpers) come first on the CLI's PATH, in order
// and once each, ahead of a program of the same name further on; the
// rest of PATH is kept; a run without helpers keeps PATH as it is.
func TestAttemptPutsHelpersFirstOnPath(t *testing.T) {
	shadowed, first, second := t.TempDir(), filepath.Join(t.TempDir(), "it's here"), t.TempDir()
	for dir, name := range map[string]string{shadowed: "hx", first: "hx", second: "hy"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho \"${0%/*}\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &Profile{Info: agent.Info{Name: "fake", Protocol: "openai"}, Launch: func(in LaunchInput) Launch {
		return Launch{Command: `{ hx; hy; printf '%s\n' "$PATH"; } > ran.txt`}
	}}
	ran := func(helpers []string) []string {
		t.Helper()
		sb, ws := startHost(t)
		a := &Agent{spec: run.AgentSpec{Name: "fake", Binary: "/bin/true", Helpers: helpers}, profile: p}
		var out syncBuf
		o, err := a.Attempt(context.Background(), agent.AttemptInput{N: 1, Prompt: "task", Runner: sb.Runner(), WorkDir: sb.WorkDir(),
			Env: []string{"PATH=" + shadowed + ":" + os.Getenv("PATH")}, Output: &out,
			Gateway: &agent.Gateway{URL: "http://127.0.0.1:9", Key: "k", Routes: []string{"openai"}}})
		if err != nil || o.Reason != run.ReasonCompleted {
			t.Fatalf("%+v %v\n%s", o, err, out.String())
		}
		b, _ := os.ReadFile(filepath.Join(ws, "ran.txt"))
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	got := ran([]string{filepath.Join(first, "hx"), filepath.Join(second, "hy"), filepath.Join(first, "hx")})
	want := []string{first, second, first + ":" + second + ":" + shadowed + ":" + os.Getenv("PATH")}
	if !slices.Equal(got, want) {
		t.Fatalf("with helpers ran\n%q, want\n%q", got, want)
	}
	if got := ran(nil); got[0] != shadowed || got[len(got)-1] != shadowed+":"+os.Getenv("PATH") {
		t.Fatalf("without helpers ran %q", got)
	}
}
