package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writePolicy writes a policy file under the test's root and returns its
// path.
func (e *env) writePolicy(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.root, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// refused asserts a submit (or resume) that the policy refuses: exit 2,
// the catalog error code with rule named in its cause, and no run made.
func (e *env) refused(res result, code, rule string, before int) {
	e.t.Helper()
	var doc struct {
		Error struct{ Code, Cause string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || res.code != 2 || doc.Error.Code != code {
		e.t.Fatalf("exit %d, want 2 with %s\nstdout: %s\nstderr: %s", res.code, code, res.stdout, res.stderr)
	}
	if rule != "" && !strings.Contains(doc.Error.Cause, "rule "+rule+":") {
		e.t.Fatalf("the cause does not name rule %s: %s", rule, doc.Error.Cause)
	}
	// A workspace lives in its run's directory: no run, no workspace.
	if n := len(e.runIDs()); n != before {
		e.t.Fatalf("%d runs after a refused submit, want %d", n, before)
	}
}

// modelServer is a loopback server standing in for a model server: submit
// only needs it to listen (the runs here never ask it anything).
func modelServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusNotFound) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPolicyViolationEachRule breaks each rule of a policy once through
// the CLI: every submit is refused with policy_violation naming the rule,
// before anything is made. (images needs a backend that runs images: see
// the docker test and the policy package's.)
func TestPolicyViolationEachRule(t *testing.T) {
	e := newEnv(t)
	model := modelServer(t)
	host := "version = 1\nhost_sandbox = true\n"
	base := []string{"--sandbox", "host", "--agent-cmd", "true"}
	for _, c := range []struct {
		rule, policy string
		args         []string
	}{
		{"agents", host + `agents = ["builtin"]`, base},
		{"host_sandbox", "version = 1\n", base},
		{"sandboxes", host + `sandboxes = ["native"]`, base},
		{"network", host + `network = ["none"]`, append(base, "--allow", "example.com")},
		{"egress", host + "[egress]\nallow = [\"*.corp.example\"]\npresets = [\"npm\"]", append(base, "--allow", "preset:pypi")},
		{"egress", host + "[egress]\nallow = [\"api.corp.example:443\"]", append(base, "--allow", "api.corp.example:8443")},
		{"env", host + `env = ["CI"]`, append(base, "--env", "HOME")},
		{"checks", host + "[[checks]]\nname = \"unit\"\ncommand = \"test -f x.txt\"", append(base, "--check", "unit=true")},
		{"max_attempts", host + "max_attempts = 2", append(base, "--attempts", "3")},
		{"max_timeout", host + `max_timeout = "1h"`, append(base, "--timeout", "90m")},
		{"max_disk", host + `max_disk = "1G"`, append(base, "--disk", "2G")},
		{"max_tokens", host + "max_tokens = 1000", append(base, "--model-server", model, "--max-tokens", "5000")},
		{"max_cost", host + "max_cost = 1.5", append(base, "--model-server", model, "--max-cost", "2")},
	} {
		t.Run(c.rule, func(t *testing.T) {
			p := e.writePolicy("policy.toml", c.policy+"\n")
			res := e.agentrun([]string{"AGENTRUN_POLICY=" + p}, append([]string{"submit", "--json"}, append(c.args, "t")...)...)
			e.refused(res, "policy_violation", c.rule, 0)
		})
	}
	// The config file's policy key names the file too (relative to the
	// config's directory).
	cfg := filepath.Join(e.root, "config", "agentrun")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "policy.toml"), []byte("version = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte("policy = \"policy.toml\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.refused(e.run(append([]string{"submit", "--json"}, append(base, "t")...)...), "policy_violation", "host_sandbox", 0)
	// policy show says where the policy in force was named.
	if res := e.run("policy", "show", "--json"); !strings.Contains(res.stdout, `"source": "config file"`) {
		t.Fatalf("policy show: %s", res.stdout)
	}
}

// TestPolicyFileRefused: a missing, broken or unknown-key policy file
// fails submit (bad_policy, nothing made), never passes silently; policy
// check says the same and prints the digest of a good one, the same for
// the same content written otherwise.
func TestPolicyFileRefused(t *testing.T) {
	e := newEnv(t)
	args := []string{"submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t"}
	for _, c := range []struct{ name, content, want string }{
		{"missing", "", "does not exist"},
		{"broken", "version = = 1\n", "policy.toml"},
		{"unknown key", "version = 1\nagent = [\"claude\"]\n", `unknown key \"agent\"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(e.root, "missing.toml")
			if c.content != "" {
				p = e.writePolicy("policy.toml", c.content)
			}
			res := e.agentrun([]string{"AGENTRUN_POLICY=" + p}, args...)
			e.refused(res, "bad_policy", "", 0)
			if !strings.Contains(res.stdout, c.want) {
				t.Fatalf("the error does not say %q: %s", c.want, res.stdout)
			}
			if res := e.run("policy", "check", "--json", p); res.code != 2 || !strings.Contains(res.stdout, `"bad_policy"`) {
				t.Fatalf("policy check: exit %d %s", res.code, res.stdout)
			}
		})
	}
	a := e.writePolicy("a.toml", "version = 1\nmax_attempts = 2\nagents = [\"claude\", \"builtin\"]\n")
	b := e.writePolicy("b.toml", "# the same\nagents = [ \"builtin\",\n \"claude\" ]\nmax_attempts = 2\nversion = 1\n")
	digest := func(p string) string {
		res := e.run("policy", "check", "--json", p)
		must(t, res, 0)
		var d struct{ Digest string }
		_ = json.Unmarshal([]byte(res.stdout), &d)
		return d.Digest
	}
	if da, db := digest(a), digest(b); da == "" || da != db {
		t.Fatalf("digests %q and %q of the same policy", da, db)
	}
	if res := e.run("policy", "show"); !strings.Contains(res.stdout, "no organization policy") {
		t.Fatalf("policy show without one: %s", res.stdout)
	}
}

// TestPolicyCompliantRunAndResume: a run within the policy succeeds with
// the required check added and the policy's digest recorded; resuming
// past the policy (a budget over its maximum, or a run the policy since
// tightened no longer allows) is refused and leaves the run as it was.
func TestPolicyCompliantRunAndResume(t *testing.T) {
	e := newEnv(t)
	p := e.writePolicy("policy.toml", `version = 1
agents = ["command"]
sandboxes = ["host"]
host_sandbox = true
network = ["none", "allowlist"]
env = ["CI"]
max_timeout = "30m"
max_attempts = 2
max_tokens = 1000
max_disk = "1G"

[egress]
allow = ["api.example.com"]

[[checks]]
name = "policy-check"
command = "test -f x.txt"
`)
	pol := []string{"AGENTRUN_POLICY=" + p, "CI=1"}
	res := e.run("policy", "check", "--json", p)
	must(t, res, 0)
	var chk struct{ Digest string }
	_ = json.Unmarshal([]byte(res.stdout), &chk)

	// --timeout 0 leaves the bound open: the policy's maximum fills it,
	// as it fills the disk the run does not name.
	d, res := e.submitJSON(pol, "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "--env", "CI", "--allow", "api.example.com", "--attempts", "1", "--timeout", "0", "--wait", "t")
	must(t, res, 0)
	r := e.get(d.ID)
	if r.Provenance.OrgPolicyDigest != chk.Digest || !strings.HasPrefix(chk.Digest, "sha256:") {
		t.Fatalf("org policy digest %q, want %q", r.Provenance.OrgPolicyDigest, chk.Digest)
	}
	if len(r.Checks) != 1 || r.Checks[0].Name != "policy-check" || r.Timeout.D().String() != "30m0s" || r.Sandbox.Limits.DiskBytes != 1<<30 {
		t.Fatalf("the policy was not applied: checks %v, timeout %s, disk %d", r.Checks, r.Timeout.D(), r.Sandbox.Limits.DiskBytes)
	}
	st := e.run("status", "--json", d.ID)
	if !strings.Contains(st.stdout, `"org_policy_digest": "`+chk.Digest+`"`) {
		t.Fatalf("status --json lacks the digest: %s", st.stdout)
	}

	// A run that fails its required check, with a model gateway.
	model := modelServer(t)
	d, res = e.submitJSON(pol, "--sandbox", "host", "--agent-cmd", "true", "--model-server", model, "--attempts", "2", "--timeout", "10m", "--wait", "t")
	must(t, res, 1)
	if g := e.get(d.ID).Gateway; g == nil || g.MaxTokens != 1000 {
		t.Fatalf("the policy's token budget was not applied: %+v", g)
	}
	before := len(e.runIDs())
	e.refused(e.agentrun(pol, "resume", "--json", "--max-tokens", "5000", d.ID), "policy_violation", "max_tokens", before)
	e.refused(e.agentrun(pol, "resume", "--json", "--max-tokens", "0", d.ID), "policy_violation", "max_tokens", before)
	// The policy tightened since: the run's two attempts are too many now.
	e.writePolicy("policy.toml", strings.Replace(mustRead(t, p), "max_attempts = 2", "max_attempts = 1", 1))
	e.refused(e.agentrun(pol, "resume", "--json", d.ID), "policy_violation", "max_attempts", before)
	if got := e.get(d.ID); got.State != "failed" {
		t.Fatalf("a refused resume changed the run: %s", got.State)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPolicyImagesByDigest: on a backend that runs images, the images
// rule takes an image named by a digest it lists; a tag (even one pinned
// in the config) and a digest it does not list are refused.
func TestPolicyImagesByDigest(t *testing.T) {
	e := newEnv(t)
	image := e.useDocker()
	const tag = "localhost/agentrun-test:busybox" // .ci/install-podman.sh's
	cfg := filepath.Join(e.root, "config", "agentrun")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte("[images]\n\""+tag+"\" = \""+image+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := e.writePolicy("policy.toml", "version = 1\nimages = [\""+image+"\"]\n")
	pol := []string{"AGENTRUN_POLICY=" + p}
	args := func(img string, more ...string) []string {
		return append([]string{"submit", "--json", "--sandbox", "docker", "--image", img, "--agent-cmd", "echo x > x.txt"}, append(more, "t")...)
	}
	e.refused(e.agentrun(pol, args(tag)...), "policy_violation", "images", 0)
	other := e.writePolicy("other.toml", "version = 1\nimages = [\"sha256:"+strings.Repeat("0", 64)+"\"]\n")
	e.refused(e.agentrun([]string{"AGENTRUN_POLICY=" + other}, args(image)...), "policy_violation", "images", 0)
	res := e.agentrun(pol, args(image, "--wait")...)
	must(t, res, 0)
}
