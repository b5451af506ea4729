package submit

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The plan records the directory the submit names, relative to the
// repository's top (through a symlink too): the agent and the checks
// start there. The top itself is "".
func TestPlanRecordsSubdir(t *testing.T) {
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{"a/b/x.txt": "x\n", "y.txt": "y\n"})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(repo, "a"), link); err != nil {
		t.Fatal(err)
	}
	svc := &Service{Backends: map[string]sandbox.Backend{"host": host.New()}, Agents: external.Infos(), Providers: all.Providers()}
	for dir, want := range map[string]string{repo: "", filepath.Join(repo, "a", "b"): "a/b", link: "a"} {
		r, _, err := svc.Plan(ctx, Request{Repo: dir, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "host"})
		if err != nil || r.Subdir != want {
			t.Errorf("from %s: subdir %q (%v), want %q", dir, r.Subdir, err, want)
		}
	}
}
