package submit

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func planWith(t *testing.T, repo string, mut func(*Request)) (*Request, []string, error) {
	t.Helper()
	req := Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "host"}
	mut(&req)
	svc := &Service{Backends: map[string]sandbox.Backend{"host": host.New()}, Agents: external.Infos(), Providers: all.Providers()}
	r, warnings, err := svc.Plan(context.Background(), req)
	if err == nil {
		if r.Setup != nil {
			req.Setup, req.SetupAllow = r.Setup.Command+" ("+r.Setup.Source+")", r.Setup.Allow
		} else {
			req.Setup = ""
		}
	}
	return &req, warnings, err
}

func TestSetupFromTheBaseCommitOnly(t *testing.T) {
	t.Parallel()
	repo, _ := testsupport.Repo(t, map[string]string{".agentrun.toml": "setup = \"make deps\"\nsetup_allow = [\"proxy.golang.org\", \"example.com\"]\n"})
	// The working tree's copy is never read.
	if err := os.WriteFile(filepath.Join(repo, ".agentrun.toml"), []byte("setup = \"evil\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, warnings, err := planWith(t, repo, func(r *Request) { r.IncludeDirty = true; r.SetupAllow = []string{"proxy.golang.org"} })
	if err != nil {
		t.Fatal(err)
	}
	if req.Setup != "make deps (.agentrun.toml)" || !slices.Equal(req.SetupAllow, []string{"proxy.golang.org"}) {
		t.Fatalf("setup %q allow %v", req.Setup, req.SetupAllow)
	}
	// The repository asked for example.com too: named in a warning, not opened.
	if !slices.ContainsFunc(warnings, func(w string) bool {
		return strings.Contains(w, "example.com") && strings.Contains(w, "cannot open it")
	}) {
		t.Fatalf("warnings %q", warnings)
	}
	// --setup overrides the repository's; --no-setup runs none.
	if req, _, err := planWith(t, repo, func(r *Request) { r.IncludeDirty = true; r.Setup = "npm ci" }); err != nil || req.Setup != "npm ci (flag)" {
		t.Fatalf("--setup: %q %v", req.Setup, err)
	}
	if req, _, err := planWith(t, repo, func(r *Request) { r.IncludeDirty = true; r.NoSetup = true }); err != nil || req.Setup != "" {
		t.Fatalf("--no-setup: %q %v", req.Setup, err)
	}
}

func TestRepoConfigRefused(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not toml":    "setup = \n",
		"unknown key": "setup = \"x\"\nnetwork = \"host\"\n",
		"too large":   "setup = \"" + strings.Repeat("x", maxRepoConfig) + "\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, _ := testsupport.Repo(t, map[string]string{".agentrun.toml": body})
			if _, _, err := planWith(t, repo, func(*Request) {}); !catalog.Has(err, catalog.BadRepoConfig) {
				t.Fatalf("want bad_repo_config, got %v", err)
			}
		})
	}
	repo, _ := testsupport.Repo(t, map[string]string{"README.md": "x\n"})
	if req, _, err := planWith(t, repo, func(*Request) {}); err != nil || req.Setup != "" {
		t.Fatalf("no .agentrun.toml: %q %v", req.Setup, err)
	}
	if _, _, err := planWith(t, repo, func(r *Request) { r.Setup, r.SetupAllow = "x", []string{"http://bad/"} }); !catalog.Has(err, catalog.BadAllow) {
		t.Fatalf("bad --setup-allow: %v", err)
	}
}

func TestToolchainCaches(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	for _, d := range []string{".npm", "go/pkg/mod"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"HOME": home, "PATH": ""} // no go on PATH: its default path
	tcs, warnings, err := planToolchains([]string{"npm", "go", "cargo", "npm"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(tcs) != 2 || tcs[0].Name != "go" || tcs[0].Path != filepath.Join(home, "go/pkg/mod") || tcs[1].Name != "npm" {
		t.Fatalf("caches %+v", tcs)
	}
	if !slices.Contains(tcs[0].Env, "GOMODCACHE="+filepath.Join(home, "go/pkg/mod")) || !slices.Contains(tcs[1].Env, "npm_config_cache="+filepath.Join(home, ".npm")) {
		t.Fatalf("env %+v", tcs)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "cargo") {
		t.Fatalf("warnings %q", warnings)
	}
	if _, _, err := planToolchains([]string{"maven"}, func(k string) string { return env[k] }); !catalog.Has(err, catalog.BadToolchain) {
		t.Fatalf("unknown cache: %v", err)
	}
}

// TestLoopbackWarning: an allow entry for this machine's loopback that a
// sandbox does not reach at the same address is named, with the flag it
// came with; one it reaches, or another host, is not.
func TestLoopbackWarning(t *testing.T) {
	if w := loopbackWarning("‹setup_allow›", []string{"127.0.0.1:4873", "registry.npmjs.org"}); w != "" {
		t.Errorf("a forwarded entry warned: %s", w)
	}
	if w := loopbackWarning("‹setup_allow›", []string{"127.0.0.1:80"}); w != "" {
		t.Errorf("a forwarded entry below 1024 warned: %s", w)
	}
	w := loopbackWarning("‹setup_allow›", []string{"127.0.0.1:4873", "127.0.0.1:*", "[::1]:5432", "127.0.0.1:3128"})
	if !strings.HasPrefix(w, "‹setup_allow› 127.0.0.1:*, [::1]:5432, 127.0.0.1:3128 names this machine's loopback") {
		t.Errorf("warning %q", w)
	}
}
