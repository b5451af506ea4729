package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

const imageID = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// orgSample sets every rule.
const orgSample = `version = 1
agents = ["claude", "builtin"]
sandboxes = ["native", "docker"]
host_sandbox = false
images = ["registry.example/golang@sha256:2222222222222222222222222222222222222222222222222222222222222222", "` + imageID + `"]
network = ["none", "allowlist"]
env = ["GOFLAGS", "CI"]
max_timeout = "2h"
max_attempts = 3
max_tokens = 1000000
max_cost = 5.5
max_disk = "20G"

[egress]
allow = ["api.example.com", "*.corp.example:443", "10.0.0.0/8"]
presets = ["goproxy"]

[[checks]]
name = "unit"
command = "go test ./..."

[[checks]]
name = "vet"
command = "go vet ./..."
`

// orgReordered says the same as orgSample, written otherwise: keys and
// list items in another order, duplicates, other spellings of the same
// duration, size and entries, comments.
const orgReordered = `# the same policy
max_disk = "20480M"
max_cost = 5.50
max_tokens = 1_000_000
max_attempts = 3
max_timeout = "120m"
env = ["CI", "GOFLAGS", "CI"]
network = ["allowlist", "none"]
images = ["` + imageID + `",
  "registry.example/golang@sha256:2222222222222222222222222222222222222222222222222222222222222222"]
version = 1
sandboxes = ["docker", "native"]
agents = ["builtin", "claude"]

[[checks]]
command = "go test ./..."
name = "unit"

[[checks]]
name = "vet"
command = "go vet ./..."

[egress]
presets = ["goproxy", "goproxy"]
allow = ["10.0.0.0/8", "*.CORP.example:443", "API.example.com."]
`

func parse(t *testing.T, s string) *Org {
	t.Helper()
	o, err := ParseOrg([]byte(s), "policy.toml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return o
}

func TestOrgDigestIgnoresFormatting(t *testing.T) {
	a, b := parse(t, orgSample), parse(t, orgReordered)
	if a.Digest() != b.Digest() {
		t.Fatalf("the same policy written otherwise has another digest:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	c := parse(t, strings.Replace(orgSample, "max_attempts = 3", "max_attempts = 4", 1))
	if c.Digest() == a.Digest() {
		t.Fatal("another max_attempts kept the digest")
	}
	// The checks' order is content (they run in it).
	d := parse(t, strings.Replace(strings.Replace(orgSample, `"unit"`, `"x"`, 1), `"vet"`, `"unit"`, 1))
	if d.Digest() == a.Digest() {
		t.Fatal("another check kept the digest")
	}
	// A rule set to an empty list (allows nothing) is not the rule unset.
	e, f := parse(t, "version = 1\n"), parse(t, "version = 1\nagents = []\n")
	if e.Digest() == f.Digest() {
		t.Fatal("agents = [] has the digest of no agents rule")
	}
	if !strings.HasPrefix(a.Digest(), "sha256:") || len(a.Digest()) != 71 {
		t.Fatalf("digest %q", a.Digest())
	}
}

func TestOrgParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"unknown key", "version = 1\nagent = [\"claude\"]\n", `unknown key "agent"`},
		{"unknown nested key", "version = 1\n[egress]\nhosts = []\n", `unknown key "egress.hosts"`},
		{"unknown check key", "version = 1\n[[checks]]\nname = \"a\"\ncommand = \"true\"\ntimeout = \"1m\"\n", `unknown key "checks.timeout"`},
		{"no version", "agents = []\n", "version is missing"},
		{"other version", "version = 2\n", "version = 2"},
		{"not toml", "version = \n", "policy.toml"},
		{"tag", "version = 1\nimages = [\"golang:1.22\"]\n", `images: "golang:1.22" is not an image by digest`},
		{"short digest", "version = 1\nimages = [\"sha256:abc\"]\n", "images"},
		{"network", "version = 1\nnetwork = [\"open\"]\n", "network"},
		{"env", "version = 1\nenv = [\"A-B\"]\n", "env"},
		{"host without host_sandbox", "version = 1\nsandboxes = [\"host\"]\n", "host_sandbox"},
		{"bad entry", "version = 1\n[egress]\nallow = [\"*.com\"]\n", "egress.allow"},
		{"preset in allow", "version = 1\n[egress]\nallow = [\"preset:npm\"]\n", "egress.presets"},
		{"unknown preset", "version = 1\n[egress]\npresets = [\"maven\"]\n", `"maven"`},
		{"check name", "version = 1\n[[checks]]\nname = \".x\"\ncommand = \"true\"\n", "checks"},
		{"check command", "version = 1\n[[checks]]\nname = \"x\"\ncommand = \" \"\n", "no command"},
		{"check twice", "version = 1\n[[checks]]\nname = \"x\"\ncommand = \"true\"\n[[checks]]\nname = \"x\"\ncommand = \"false\"\n", "twice"},
		{"timeout", "version = 1\nmax_timeout = \"soon\"\n", "max_timeout"},
		{"disk", "version = 1\nmax_disk = \"big\"\n", "max_disk"},
		{"attempts", "version = 1\nmax_attempts = 0\n", "max_attempts"},
		{"tokens", "version = 1\nmax_tokens = -1\n", "max_tokens"},
		{"cost", "version = 1\nmax_cost = 0\n", "max_cost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseOrg([]byte(c.file), "policy.toml")
			if !catalog.BadPolicy.Is(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want bad_policy with %q", err, c.want)
			}
		})
	}
}

func TestLoadOrg(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrg(filepath.Join(dir, "none.toml")); !catalog.BadPolicy.Is(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(p, []byte(orgSample), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := LoadOrg(p)
	if err != nil || o.Path != p || o.MaxTimeout != Duration(2*time.Hour) || o.MaxDisk != 20<<30 {
		t.Fatalf("LoadOrg = %+v, %v", o, err)
	}
}

// compliant is a run within orgSample once applied.
func compliant() *run.Run {
	return &run.Run{
		Agent:       run.AgentSpec{Name: "claude", Env: []string{"CI"}},
		Sandbox:     run.SandboxConfig{Backend: "docker", Network: "allowlist", Image: imageID, Allow: []string{"api.example.com", "proxy.golang.org:443", "x.corp.example:443", "10.1.2.3"}},
		Checks:      []run.CheckSpec{{Name: "lint", Command: "make lint"}, {Name: "unit", Command: "go test ./..."}},
		MaxAttempts: 3,
		Timeout:     run.Duration(time.Hour),
		Gateway:     &run.GatewaySpec{MaxTokens: 1000},
		Setup:       &run.SetupSpec{Command: "go mod download", Allow: []string{"sum.golang.org:443"}},
		Provenance:  run.Provenance{Image: imageID, ImageID: imageID},
	}
}

func TestOrgApply(t *testing.T) {
	o := parse(t, orgSample)
	r := compliant()
	r.Timeout, r.Gateway.MaxTokens = 0, 0
	o.Apply(r)
	if err := o.Check(r); err != nil {
		t.Fatalf("an applied compliant run: %v", err)
	}
	want := []run.CheckSpec{{Name: "lint", Command: "make lint"}, {Name: "unit", Command: "go test ./..."}, {Name: "vet", Command: "go vet ./..."}}
	if len(r.Checks) != 3 || r.Checks[0] != want[0] || r.Checks[1] != want[1] || r.Checks[2] != want[2] {
		t.Errorf("checks %v, want %v", r.Checks, want)
	}
	if r.Timeout.D() != 2*time.Hour || r.Sandbox.Limits.DiskBytes != 20<<30 || r.Gateway.MaxTokens != 1000000 || r.Gateway.MaxCost != 5.5 {
		t.Errorf("open bounds not filled: timeout %s, disk %d, gateway %+v", r.Timeout.D(), r.Sandbox.Limits.DiskBytes, r.Gateway)
	}
	var none *Org
	none.Apply(r)
	if none.Check(&run.Run{Sandbox: run.SandboxConfig{Backend: "host"}}) != nil || none.Digest() != "" {
		t.Error("no policy refused something")
	}
}

// TestOrgViolations breaks each rule once.
func TestOrgViolations(t *testing.T) {
	o := parse(t, orgSample)
	for _, c := range []struct {
		rule   string
		change func(r *run.Run)
		want   string // in the cause, besides the rule
	}{
		{"agents", func(r *run.Run) { r.Agent.Name = "codex" }, `"codex"`},
		{"host_sandbox", func(r *run.Run) { r.Sandbox.Backend = "host" }, "host"},
		{"sandboxes", func(r *run.Run) { r.Sandbox.Backend = "container" }, `"container"`},
		{"images", func(r *run.Run) { r.Provenance.Image = "golang:1.22" }, "a tag"},
		{"images", func(r *run.Run) {
			r.Sandbox.Image = "sha256:" + strings.Repeat("3", 64)
			r.Provenance.Image = r.Sandbox.Image
		}, "3333"},
		{"network", func(r *run.Run) { r.Sandbox.Network = "open" }, `"open"`},
		{"egress", func(r *run.Run) { r.Sandbox.Allow = append(r.Sandbox.Allow, "registry.npmjs.org:443") }, "registry.npmjs.org:443"},
		{"egress", func(r *run.Run) { r.Sandbox.Allow = []string{"x.corp.example:8443"} }, "x.corp.example:8443"},
		{"egress", func(r *run.Run) { r.Setup.Allow = []string{"pypi.org:443"} }, "setup command"},
		{"env", func(r *run.Run) { r.Agent.Env = []string{"CI", "AWS_SECRET"} }, "AWS_SECRET"},
		{"checks", func(r *run.Run) { r.Checks = r.Checks[:1] }, `"unit"`},
		{"checks", func(r *run.Run) { r.Checks[1].Command = "true" }, `"true"`},
		{"max_attempts", func(r *run.Run) { r.MaxAttempts = 4 }, "at most 3"},
		{"max_timeout", func(r *run.Run) { r.Timeout = run.Duration(3 * time.Hour) }, "3h0m0s"},
		{"max_timeout", func(r *run.Run) { r.Timeout = 0 }, "no limit"},
		{"max_disk", func(r *run.Run) { r.Sandbox.Limits.DiskBytes = 30 << 30 }, "at most 21474836480"},
		{"max_tokens", func(r *run.Run) { r.Gateway.MaxTokens = 2000000 }, "2000000"},
		{"max_tokens", func(r *run.Run) { r.Gateway.MaxTokens = 0 }, "no limit"},
		{"max_cost", func(r *run.Run) { r.Gateway.MaxCost = 6 }, "at most 5.5"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			r := compliant()
			o.Apply(r)
			if err := o.Check(r); err != nil {
				t.Fatalf("compliant: %v", err)
			}
			c.change(r)
			err := o.Check(r)
			if !catalog.PolicyViolation.Is(err) || !strings.Contains(err.Error(), "rule "+c.rule+":") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want policy_violation naming rule %s and %q", err, c.rule, c.want)
			}
		})
	}
	// Without an image rule's backend (no image), images bound nothing.
	r := compliant()
	o.Apply(r)
	r.Sandbox.Backend, r.Sandbox.Image, r.Provenance.Image = "native", "", ""
	if err := o.Check(r); err != nil {
		t.Fatalf("a run without an image: %v", err)
	}
	// A run without a model gateway has no budget to bound.
	r.Gateway = nil
	if err := o.Check(r); err != nil {
		t.Fatalf("a run without a gateway: %v", err)
	}
	// A rule set to nothing allows nothing.
	empty := parse(t, "version = 1\nenv = []\n")
	if err := empty.Check(&run.Run{Agent: run.AgentSpec{Env: []string{"CI"}}}); !catalog.PolicyViolation.Is(err) || !strings.Contains(err.Error(), "allows none") {
		t.Fatalf("env = []: %v", err)
	}
	if err := empty.Check(&run.Run{}); err != nil {
		t.Fatalf("env = [] with no variables: %v", err)
	}
}
