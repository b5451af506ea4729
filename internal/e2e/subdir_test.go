package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// submitIn runs `agentrun submit --json --wait` with args in dir and
// returns the run it made.
func (e *env) submitIn(dir string, args ...string) (*run.Run, string) {
	e.t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(e.bin, append([]string{"submit", "--json", "--wait"}, args...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, e.vars, &out, &out
	if err := cmd.Run(); err != nil {
		if strings.Contains(out.String(), "sandbox_preflight") {
			requireCaps(e.t, "the native sandbox", false, out.String())
		}
		e.t.Fatalf("submit in %s: %v\n%s", dir, err, out.String())
	}
	return e.get(between(out.String(), `"id": "`, `"`)), out.String()
}

// commitSvcAPI commits the directory svc/api, with svc/api/main.txt, to
// the repository, and returns its path.
func (e *env) commitSvcAPI() string {
	e.t.Helper()
	sub := filepath.Join(e.repo, "svc", "api")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "main.txt"), []byte("m\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	testsupport.Git(e.t, e.repo, "add", "svc")
	testsupport.Git(e.t, e.repo, "commit", "-qm", "svc")
	return sub
}

// A task given in a directory of the repository starts the agent and the
// checks there; one given in a directory the base commit does not have
// starts them at the top, and says so.
func TestSubmitFromSubdirectory(t *testing.T) {
	e := newEnv(t)
	sub := e.commitSvcAPI()
	r, out := e.submitIn(sub, "--network", "none", "--agent-cmd", "pwd > here.txt", "--check", "here=test -f here.txt && test -f main.txt", "work here")
	if r.State != run.StateSucceeded || r.Subdir != "svc/api" {
		t.Fatalf("run %s: %s (%s), subdir %q", r.ID, r.State, r.Message, r.Subdir)
	}
	// The document's warnings are the record's: [] when it warned of
	// nothing (never null), as on a machine that holds every limit.
	if r.Warnings == nil && !strings.Contains(out, `"warnings": []`) ||
		r.Warnings != nil && !strings.Contains(out, "warning: "+r.Warnings[0]+"\n") {
		t.Errorf("warnings: record %q, output\n%s", r.Warnings, out)
	}
	if got := testsupport.Git(t, e.repo, "show", r.Branch+":svc/api/here.txt"); !strings.HasSuffix(got, "/svc/api") {
		t.Fatalf("the agent worked in %q", got)
	}

	// A directory of the working tree alone.
	untracked := filepath.Join(e.repo, "scratch")
	if err := os.MkdirAll(untracked, 0o755); err != nil {
		t.Fatal(err)
	}
	r, out = e.submitIn(untracked, "--network", "none", "--include-dirty", "--agent-cmd", "pwd > here.txt", "work there")
	if r.State != run.StateSucceeded || r.Subdir != "scratch" {
		t.Fatalf("run %s: %s (%s), subdir %q", r.ID, r.State, r.Message, r.Subdir)
	}
	if _, err := testsupport.GitCmd(t, e.repo, "cat-file", "-e", r.Branch+":here.txt").Output(); err != nil {
		t.Fatalf("the agent did not start at the top: %v", err)
	}
	events, err := os.ReadFile(filepath.Join(e.home, "runs", r.ID, "events.jsonl"))
	if err != nil || !strings.Contains(string(events), "scratch, where the task was given, is not a directory in the workspace") {
		t.Fatalf("no warning journaled (%v):\n%s\n%s", err, events, out)
	}
}
