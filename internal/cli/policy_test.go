package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// policyFile sets every rule, so that its --json document shows each.
const policyFile = `version = 1
agents = ["claude", "builtin"]
sandboxes = ["native", "docker"]
images = ["sha256:1111111111111111111111111111111111111111111111111111111111111111"]
network = ["none", "allowlist"]
env = ["CI"]
max_timeout = "2h"
max_attempts = 3
max_tokens = 1000
max_cost = 2.5
max_disk = "10G"

[egress]
allow = ["api.example.com"]
presets = ["npm"]

[[checks]]
name = "unit"
command = "go test ./..."
`

// TestPolicyJSON: policy check and policy show, with and without a
// policy in force, print documents of policy.schema.json; show tells
// people every rule.
func TestPolicyJSON(t *testing.T) {
	h := newTestHome(t)
	p := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(p, []byte(policyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := h.exec("policy", "show", "--json")
	if m := validDoc(t, "policy.schema.json", "policy show (none)", out); code != 0 || m["policy"] != nil {
		t.Fatalf("exit %d: %s", code, out)
	}
	code, out, _ = h.exec("policy", "check", "--json", p)
	m := validDoc(t, "policy.schema.json", "policy check", out)
	digest, _ := m["digest"].(string)
	if code != 0 || !strings.HasPrefix(digest, "sha256:") || m["source"] != "argument" {
		t.Fatalf("exit %d: %s", code, out)
	}
	h.env["AGENTRUN_POLICY"] = p
	code, out, _ = h.exec("policy", "show", "--json")
	if m := validDoc(t, "policy.schema.json", "policy show", out); code != 0 || m["digest"] != digest || m["source"] != "environment AGENTRUN_POLICY" {
		t.Fatalf("exit %d: %s", code, out)
	}
	code, out, _ = h.exec("policy", "show")
	for _, rule := range []string{"agents", "sandboxes", "host_sandbox", "images", "network", "egress.allow", "egress.presets", "env", "checks", "max_timeout", "max_attempts", "max_tokens", "max_cost", "max_disk", digest} {
		if !strings.Contains(out, rule) {
			t.Errorf("policy show lacks %s:\n%s", rule, out)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// check without a file checks the policy in force.
	if code, out, _ = h.exec("policy", "check"); code != 0 || !strings.Contains(out, digest) {
		t.Fatalf("policy check (in force): exit %d %s", code, out)
	}
}

// TestPolicyMCPSubmit: the MCP server's submit is the CLI's, in process:
// the local policy holds it too, and nothing is made.
func TestPolicyMCPSubmit(t *testing.T) {
	h := newTestHome(t)
	repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hi\n"})
	h.env["PATH"] = os.Getenv("PATH")
	h.env["AGENTRUN_POLICY"] = filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(h.env["AGENTRUN_POLICY"], []byte("version = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	app, _, _ := h.app()
	out, _, code := app.mcpExec(context.Background(), []string{"submit", "--json", "--repo", repo, "--sandbox", "host", "--agent-cmd", "true", "--", "t"}, nil)
	if e := jsonErr(t, string(out)); code != 2 || e["code"] != "policy_violation" || !strings.Contains(string(out), "rule host_sandbox:") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if runs, _, err := h.st.List(context.Background(), run.Filter{}); err != nil || len(runs) != 0 {
		t.Fatalf("runs %v, %v", runs, err)
	}
}
