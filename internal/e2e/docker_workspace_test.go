package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestDockerFullHistoryAndIncludedFiles: in the docker sandbox the user's
// object directory is visible read-only at its own path (the workspace's
// alternates name it, and a write into it fails) and the included file
// is in the workspace; the user's repository is byte for byte what it
// was. The test image has no git: what git would read is checked with
// the shell. Needs a container engine (AGENTRUN_DOCKER_TEST_HOST, with
// AGENTRUN_DOCKER_TEST_IMAGE: eval "$(bash .ci/install-podman.sh)").
func TestDockerFullHistoryAndIncludedFiles(t *testing.T) {
	engine, image := os.Getenv("AGENTRUN_DOCKER_TEST_HOST"), os.Getenv("AGENTRUN_DOCKER_TEST_IMAGE")
	testsupport.Require(t, "a container engine", engine != "" && image != "", "AGENTRUN_DOCKER_TEST_HOST and AGENTRUN_DOCKER_TEST_IMAGE are not set")
	e := newEnv(t)
	outside, err := os.MkdirTemp("/var/tmp", "agentrun-docker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	e.repo = filepath.Join(outside, "repo")
	testsupport.RepoAt(t, e.repo, map[string]string{"README.md": "hello\n", ".gitignore": ".env\n", ".worktreeinclude": ".env\n"})
	if err := os.WriteFile(filepath.Join(e.repo, ".env"), []byte("TOKEN=local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := `objects=$(cat .git/objects/info/alternates)
test -d "$objects/pack" && echo SEEN
if echo x > "$objects/evil" 2>/dev/null; then echo WROTE; fi
if mkdir "$objects/ab" 2>/dev/null; then echo WROTE-DIR; fi
cat .env
true`
	before := treeDigest(t, filepath.Join(e.repo, ".git"))
	res := e.agentrun([]string{"DOCKER_HOST=" + engine}, "submit", "--json", "--sandbox", "docker", "--image", image, "--history", "full", "--agent-cmd", agent, "--wait", "t")
	d := decodeSubmit(t, res)
	log := e.agentLog(d.ID)
	if d.Reason != string(run.ReasonNoChanges) || !strings.Contains(string(log), "SEEN") || strings.Contains(string(log), "WROTE") || !strings.Contains(string(log), "TOKEN=local") {
		t.Fatalf("%+v\nagent.log:\n%s\nstderr: %s\nsupervisor:\n%s", d, log, res.stderr, e.supervisorLog(d.ID))
	}
	if after := treeDigest(t, filepath.Join(e.repo, ".git")); after != before {
		t.Fatal("the user's repository changed")
	}
	if r := e.get(d.ID); r.Workspace.History != run.HistoryFull || len(r.Provenance.Included) != 1 {
		t.Fatalf("workspace %+v included %+v", r.Workspace, r.Provenance.Included)
	}
}
