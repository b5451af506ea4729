package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func sample() *run.Run {
	return &run.Run{
		Sandbox:     run.SandboxConfig{Backend: "native", Network: "allowlist", Allow: []string{"b.example", "a.example", "a.example"}},
		Agent:       run.AgentSpec{Name: "claude", Command: "claude -p", Env: []string{"Z", "A"}, Hosts: []string{"api.anthropic.com"}},
		Checks:      []run.CheckSpec{{Name: "unit", Command: "go test ./..."}},
		MaxAttempts: 3,
		Timeout:     run.Duration(time.Hour),
		Export:      run.ExportConfig{MaxFiles: 10, MaxBytes: 20, AuthorName: "not policy"},
	}
}

func TestCanonicalDeterministic(t *testing.T) {
	a := FromRun(sample())
	r := sample()
	r.Sandbox.Allow = []string{"a.example", "b.example"}
	r.Agent.Env = []string{"A", "Z"}
	r.Export.AuthorName = "someone else"
	b := FromRun(r)
	if string(a.Canonical()) != string(b.Canonical()) || a.Digest() != b.Digest() {
		t.Fatalf("order or non-policy fields changed the digest:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	if !strings.HasPrefix(a.Digest(), "sha256:") || len(a.Digest()) != 7+64 {
		t.Fatalf("digest %q", a.Digest())
	}
	want := `{"version":1,"sandbox":"native","network":"allowlist","allow":["a.example","b.example"],"env":["A","Z"],"read_only_paths":[],"limits":{},"checks":[{"name":"unit","command":"go test ./..."}],"attempts":3,"timeout":"1h0m0s","agent":{"name":"claude","command":"claude -p","hosts":["api.anthropic.com"]},"max_files":10,"max_bytes":20}`
	if got := string(a.Canonical()); got != want {
		t.Fatalf("canonical bytes changed (a deliberate change bumps Version):\n got %s\nwant %s", got, want)
	}
}

func TestDigestChangesWithPolicy(t *testing.T) {
	base := FromRun(sample()).Digest()
	for name, mut := range map[string]func(*run.Run){
		"sandbox":  func(r *run.Run) { r.Sandbox.Backend = "host" },
		"network":  func(r *run.Run) { r.Sandbox.Network = "none" },
		"allow":    func(r *run.Run) { r.Sandbox.Allow = append(r.Sandbox.Allow, "c.example") },
		"loopback": func(r *run.Run) { r.Sandbox.LoopbackTCP = true },
		"env":      func(r *run.Run) { r.Agent.Env = append(r.Agent.Env, "SECRET") },
		"limits":   func(r *run.Run) { r.Sandbox.Limits.Pids = 10 },
		"checks":   func(r *run.Run) { r.Checks[0].Command = "true" },
		"attempts": func(r *run.Run) { r.MaxAttempts = 1 },
		"timeout":  func(r *run.Run) { r.Timeout = 0 },
		"agent":    func(r *run.Run) { r.Agent.Command = "sh" },
	} {
		r := sample()
		mut(r)
		if FromRun(r).Digest() == base {
			t.Errorf("%s: digest did not change", name)
		}
	}
}
