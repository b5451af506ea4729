package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// A run submitted to a team server from a directory of the repository
// starts its agent and its checks there, as a local run does; --subdir
// names the directory outright, and one the base commit does not have,
// or one outside the repository, is refused with nothing made.
func TestClientSubmitFromSubdirectory(t *testing.T) {
	e := newEnv(t)
	s := loadSchemas(t)
	srv := []string{"AGENTRUN_SERVER=" + e.teamServer()}
	sub := e.commitSvcAPI()

	res := e.agentrun(srv, "submit", "--json", "--wait", "--repo", sub, "--sandbox", "host",
		"--agent-cmd", "pwd > here.txt", "--check", "here=test -f here.txt && test -f main.txt", "work here")
	must(t, res, 0)
	d := validJSON(t, s, "submit.schema.json", "submit --wait", res)
	id, _ := d["id"].(string)
	if d["status"] != "succeeded" {
		t.Fatalf("submit from svc/api: %s\n%s", res.stdout, res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+id+":svc/api/here.txt"); !strings.HasSuffix(got, "/svc/api") {
		t.Errorf("the agent worked in %q", got)
	}
	res = e.agentrun(srv, "status", "--json", id)
	must(t, res, 0)
	if m := validJSON(t, s, "status.schema.json", "status", res); m["subdir"] != "svc/api" {
		t.Errorf("status: subdir %v", m["subdir"])
	}

	// --subdir names it, from the top (and with a trailing slash).
	res = e.agentrun(srv, "submit", "--json", "--wait", "--subdir", "svc/", "--sandbox", "host", "--agent-cmd", "pwd > there.txt", "work there")
	must(t, res, 0)
	d = validJSON(t, s, "submit.schema.json", "submit --subdir", res)
	id, _ = d["id"].(string)
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+id+":svc/there.txt"); !strings.HasSuffix(got, "/svc") {
		t.Errorf("--subdir svc/: the agent worked in %q", got)
	}

	// From a directory the base commit does not have (an untracked one),
	// the run starts at the top, and the submit says so.
	scratch := filepath.Join(e.repo, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	res = e.agentrun(srv, "submit", "--json", "--wait", "--repo", scratch, "--sandbox", "host", "--agent-cmd", "pwd > top.txt", "work at the top")
	must(t, res, 0)
	d = validJSON(t, s, "submit.schema.json", "submit from scratch", res)
	id, _ = d["id"].(string)
	if !strings.Contains(res.stderr, "scratch, where the task was given, is not a directory of the base commit") {
		t.Errorf("no warning of the untracked directory: %s", res.stderr)
	}
	if err := testsupport.GitCmd(t, e.repo, "cat-file", "-e", "agentrun/"+id+":top.txt").Run(); err != nil {
		t.Errorf("the agent did not start at the top: %v", err)
	}

	// Refused, here and by the server, before anything is made.
	before := len(e.runIDs())
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{srv, []string{"--subdir", "nope"}},
		{nil, []string{"--subdir", "nope"}},
		{srv, []string{"--subdir", "../elsewhere"}},
		{nil, []string{"--subdir", "/abs"}},
		{nil, []string{"--subdir", "svc/api/main.txt"}},
	} {
		args := append(append([]string{"--json", "submit"}, c.args...), "--sandbox", "host", "--agent-cmd", "true", "work")
		res := e.agentrun(c.env, args...)
		must(t, res, 2)
		if code := errorCode(t, s, res); code != "usage" {
			t.Errorf("%v: error %s", c.args, code)
		}
		if !strings.Contains(res.stdout, "subdir") {
			t.Errorf("%v: the error does not name subdir: %s", c.args, res.stdout)
		}
	}
	if n := len(e.runIDs()); n != before {
		t.Errorf("refused submits made runs: %d, were %d", n, before)
	}
}
