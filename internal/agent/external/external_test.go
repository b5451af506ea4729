package external

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
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
		if p.Command == "" || len(p.Hosts) == 0 || len(p.Env) == 0 || p.Doc == "" {
			t.Errorf("%s: incomplete profile %+v", p.Name, p)
		}
		// The only way a profile passes the task as an argument is the
		// quoted "$(cat)" of stdin.
		if strings.Contains(p.Command, "$(") && !strings.Contains(p.Command, `"$(cat)"`) {
			t.Errorf("%s: command substitution other than \"$(cat)\": %s", p.Name, p.Command)
		}
	}
	p, _ := Lookup("claude")
	p.Env[0] = "CHANGED"
	if q, _ := Lookup("claude"); q.Env[0] == "CHANGED" {
		t.Fatal("Lookup shares the table's slices")
	}
	if _, ok := Lookup("nosuch"); ok {
		t.Fatal("unknown profile found")
	}
	if _, err := New(run.AgentSpec{}); err == nil {
		t.Fatal("empty command accepted")
	}
}
