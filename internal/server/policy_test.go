package server_test

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/policy"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// serverPolicy is the policy of the API tests: the host sandbox (which the
// tests use), no network, two attempts, an hour, and a required check.
const serverPolicy = `version = 1
agents = ["command"]
host_sandbox = true
network = ["none"]
env = []
max_attempts = 2
max_timeout = "1h"

[[checks]]
name = "policy-check"
command = "test -f b.txt"
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyEnforcedByServer: agentrun server --policy holds every submit
// and resume through the API to the policy: a representative set of
// violations is refused (403 policy_violation naming the rule, no run
// made), a compliant run succeeds with the required check added and the
// policy's digest recorded, and a resume that the policy (tightened at a
// restart) no longer allows is refused.
func TestPolicyEnforcedByServer(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "policy.toml", serverPolicy)
	org, err := policy.LoadOrg(p)
	if err != nil {
		t.Fatal(err)
	}
	c := config{data: filepath.Join(dir, "data"), db: "sqlite:" + filepath.Join(dir, "agentrun.db"), extra: []string{"--policy", p, "--pass-env", "PATH"}}
	srv := start(t, c)
	if !strings.Contains(srv.log.String(), "organization policy "+p+" ("+org.Digest()+")") {
		t.Errorf("the server does not say which policy it holds to:\n%s", srv.log.String())
	}
	repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
	bundle := bundleOf(t, repo)
	for _, v := range []struct {
		rule  string
		extra map[string]any
	}{
		{"network", map[string]any{"allow": []string{"example.com"}}},
		// (the server passes PATH: the policy is what refuses it)
		{"env", map[string]any{"env": []string{"PATH"}}},
		{"max_attempts", map[string]any{"attempts": 3}},
		{"max_timeout", map[string]any{"timeout": "2h"}},
		{"checks", map[string]any{"checks": []map[string]string{{"name": "policy-check", "command": "true"}}}},
	} {
		a := srv.submit(t, spec("t", "true", v.extra), bundle)
		if a.status != http.StatusForbidden || a.code(t) != "policy_violation" || !strings.Contains(string(a.body), "rule "+v.rule+":") {
			t.Errorf("%s: %d %s", v.rule, a.status, a.body)
		}
	}
	if runs := srv.get(t, "/v1/runs", "").doc(t)["runs"].([]any); len(runs) != 0 {
		t.Fatalf("refused submits made runs: %v", runs)
	}

	id := srv.runID(t, spec("add b.txt", "echo new > b.txt", map[string]any{"attempts": 1, "timeout": "30m"}), bundle)
	st := srv.waitState(t, id, "succeeded", "failed")
	prov, _ := st["provenance"].(map[string]any)
	if st["status"] != "succeeded" || prov["org_policy_digest"] != org.Digest() {
		t.Fatalf("the compliant run: %v, provenance %v", st["status"], prov)
	}
	if checks, _ := st["checks"].([]any); len(checks) != 1 {
		t.Fatalf("the required check was not added: %v", st["checks"])
	}

	// A run that fails (its required check), then a policy tightened at a
	// restart: its resume is refused and the run left as it was.
	failed := srv.runID(t, spec("no b.txt", "true", map[string]any{"attempts": 2, "timeout": "30m"}), bundle)
	srv.waitState(t, failed, "failed")
	srv.stop(syscall.SIGTERM)
	writeFile(t, dir, "policy.toml", strings.Replace(serverPolicy, "max_attempts = 2", "max_attempts = 1", 1))
	srv = start(t, c)
	a := srv.post(t, "/v1/runs/{id}/resume", failed, map[string]any{})
	if a.status != http.StatusForbidden || a.code(t) != "policy_violation" || !strings.Contains(string(a.body), "rule max_attempts:") {
		t.Fatalf("resume past the policy: %d %s", a.status, a.body)
	}
	if st := srv.get(t, "/v1/runs/{id}", failed).doc(t); st["status"] != "failed" {
		t.Fatalf("a refused resume changed the run: %v", st["status"])
	}
}

// TestServerPolicyFileRefused: a policy file that is missing or does not
// parse stops the server at start, naming it.
func TestServerPolicyFileRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, file, want string }{
		{"missing", "", "does not exist"},
		{"broken", "version = 1\nmax_attempts = \"two\"\n", "policy.toml"},
		{"unknown key", "version = 1\nallow_host = true\n", `unknown key \"allow_host\"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "missing.toml")
			if c.file != "" {
				p = writeFile(t, dir, "policy.toml", c.file)
			}
			cmd := exec.Command(testsupport.Agentrun(t), "server", "--json", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
				"--local-worker", "0", "--policy", p)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AGENTRUN_HOME=" + filepath.Join(dir, "home")}
			out, err := cmd.Output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `"bad_policy"`) || !strings.Contains(string(out), c.want) {
				t.Fatalf("server with a %s policy: %v\n%s", c.name, err, out)
			}
		})
	}
}
