package e2e

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// bigRepo commits a file of n random bytes (which neither a file system
// nor a pack makes smaller) to e's repository.
func bigRepo(t *testing.T, e *env, n int) {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b)
	if err := os.WriteFile(filepath.Join(e.repo, "big.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	testsupport.Git(t, e.repo, "add", "big.bin")
	testsupport.Git(t, e.repo, "commit", "-q", "-m", "big")
}

// TestDiskBudgetPreflight: a submit whose workspace would take the runs
// past disk_budget fails at preflight (exit 2, disk_budget, its fix
// naming agentrun gc), creating no run; within the budget it runs, and
// its workspace then counts against the next submit's.
func TestDiskBudgetPreflight(t *testing.T) {
	e := newEnv(t)
	bigRepo(t, e, 3<<20)
	cfg := filepath.Join(e.root, "config", "agentrun")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	setBudget := func(b string) {
		// cache_budget: gc collects every layer no workspace uses.
		if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte("disk_budget = \""+b+"\"\ncache_budget = \"1K\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setBudget("1M")
	res := e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	if res.code != 2 || !strings.Contains(res.stdout, `"disk_budget"`) || !strings.Contains(res.stdout, "agentrun gc") || !strings.Contains(res.stdout, "a new layer for the base commit, and a full copy of it") {
		t.Fatalf("exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	if ids := e.runIDs(); len(ids) != 0 {
		t.Fatalf("a refused submit made runs %v", ids)
	}
	setBudget("10M")
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "--wait", "t")
	if res.code != 0 {
		t.Fatalf("first submit: exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	// The first run's copy (6 MiB: the file and its pack) and the layer
	// it was copied from stay until gc: a second one would pass 10M.
	res = e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	if res.code != 2 || !strings.Contains(res.stdout, `"disk_budget"`) {
		t.Fatalf("second submit: exit %d %s", res.code, res.stdout)
	}
	// agentrun gc frees the first run's workspace (once its supervisor
	// has let go of it) and the layer no workspace uses: the next fits.
	e.released(d.ID)
	must(t, e.run("gc", "--keep", "0"), 0)
	_, res = e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo y > y.txt", "--wait", "t")
	must(t, res, 0)
}

// TestLowDiskSpacePreflight: a data directory on a file system with less
// free space than the workspace needs fails the submit at preflight (exit
// 2, disk_full, saying what the workspace needs), creating no run.
func TestLowDiskSpacePreflight(t *testing.T) {
	e := newEnv(t)
	testsupport.Tmpfs(t, e.home, "2m")
	bigRepo(t, e, 4<<20)
	res := e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	if res.code != 2 || !strings.Contains(res.stdout, `"disk_full"`) || !strings.Contains(res.stdout, "this run's workspace needs about") {
		t.Fatalf("exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	if ids := e.runIDs(); len(ids) != 0 {
		t.Fatalf("a refused submit made runs %v", ids)
	}
}
