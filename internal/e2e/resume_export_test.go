package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// A run whose export failed (here a stale lock on its branch's ref, as a
// git killed midway leaves one) is, once the cause is gone, exported by
// `agentrun resume` as its last attempt left it: no other attempt runs
// (the agent counts its runs in the workspace), and the branch holds the
// work. A resume with --task would have run the agent again.
func TestResumeExportsWithoutAnotherAttempt(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitJSON(nil, "--network", "none", "--agent-cmd", "sleep 1; echo ran >> runs.txt",
		"--check", "ran=grep -q ran runs.txt", "count the runs")
	if res.code != 0 {
		t.Fatalf("submit: %d %s", res.code, res.stderr)
	}
	lock := filepath.Join(e.repo, ".git", "refs", "heads", "agentrun", d.ID+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.waitFor(d.ID, "the export to fail", func(r *run.Run) bool { return r.State.Terminal() })
	if r.State != run.StateFailed || r.Reason != run.ReasonExportFailed {
		t.Fatalf("run %s: %s (%s): %s", d.ID, r.State, r.Reason, r.Message)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	res = e.run("resume", "--wait", d.ID)
	if res.code != 0 || !strings.Contains(res.stderr, "exporting it again, without another attempt") {
		t.Fatalf("resume: %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	r = e.get(d.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 1 {
		t.Fatalf("run %s: %s (%s) after %d attempts: %s", d.ID, r.State, r.Reason, len(r.Attempts), r.Message)
	}
	if got := testsupport.Git(t, e.repo, "show", r.Branch+":runs.txt"); got != "ran" {
		t.Fatalf("runs.txt on the branch: %q, want the one attempt's line", got)
	}
}
