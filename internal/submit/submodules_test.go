package submit

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestSubmodulePaths(t *testing.T) {
	got := submodulePaths("[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib\n[submodule \"x\"]\n  PATH=\"third party/x\"\n\turl = u\n[submodule \"y\"]\n\tpath =\n")
	if want := []string{"lib", "third party/x"}; !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

// A base commit with submodules gets a warning that names them: the
// workspace holds their directories empty. One without gets none.
func TestPlanWarnsOfSubmodules(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	lib := filepath.Join(root, "lib")
	testsupport.RepoAt(t, lib, map[string]string{"lib.txt": "L\n"})
	repo := filepath.Join(root, "app")
	testsupport.RepoAt(t, repo, map[string]string{"a.txt": "a\n"})
	svc := &Service{Backends: map[string]sandbox.Backend{"host": host.New()}, Agents: external.Infos(), Providers: all.Providers()}
	req := Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "host"}
	_, warnings, err := svc.Plan(ctx, req)
	if err != nil || strings.Contains(strings.Join(warnings, "\n"), "submodule") {
		t.Fatalf("without submodules: %q %v", warnings, err)
	}
	testsupport.Git(t, repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib")
	testsupport.Git(t, repo, "commit", "-qm", "lib")
	_, warnings, err = svc.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(warnings, "\n")
	if !strings.Contains(all, "the base commit has submodules (vendor/lib): their directories are empty in the workspace") {
		t.Fatalf("with a submodule: %q", warnings)
	}
}
