package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// A submit sends the server only the history it lacks: the first one all
// of it, the same base again nothing, a new commit on top only what came
// since; each run's branch comes back on its own base.
func TestClientSendsOnlyWhatTheServerLacks(t *testing.T) {
	e := newEnv(t)
	srv := []string{"AGENTRUN_SERVER=" + e.teamServer()}
	submit := func(what string) (result, string) {
		t.Helper()
		res := e.agentrun(srv, "submit", "--wait", "--sandbox", "host", "--agent-cmd", "echo "+what+" > "+what+".txt", "Add "+what)
		must(t, res, 0)
		id, _, _ := strings.Cut(between(res.stdout, "branch agentrun/", "\n"), " ")
		if id == "" {
			t.Fatalf("submit: no branch in\n%s", res.stdout)
		}
		if got := testsupport.Git(t, e.repo, "show", "agentrun/"+id+":"+what+".txt"); got != what {
			t.Errorf("%s.txt on agentrun/%s: %q", what, id, got)
		}
		return res, id
	}
	first := testsupport.Git(t, e.repo, "rev-parse", "HEAD")
	res, _ := submit("one")
	if !strings.Contains(res.stderr, "sending the base commit "+first[:12]+": its whole history") {
		t.Errorf("the first submit:\n%s", res.stderr)
	}
	res, _ = submit("two")
	if !strings.Contains(res.stderr, "the server holds the base commit "+first[:12]+": no history to send") {
		t.Errorf("the same base again:\n%s", res.stderr)
	}
	// Two commits on top: only they are sent, the first base is the
	// bundle's prerequisite.
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(e.repo, n+".md"), []byte(n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		testsupport.Git(t, e.repo, "add", n+".md")
		testsupport.Git(t, e.repo, "commit", "-q", "-m", "add "+n)
	}
	head := testsupport.Git(t, e.repo, "rev-parse", "HEAD")
	res, id := submit("three")
	if !strings.Contains(res.stderr, "sending the base commit "+head[:12]+": its history since "+first[:12]+", which the server holds") {
		t.Errorf("a new base on top of a held one:\n%s", res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "rev-parse", "agentrun/"+id+"^"); got != head {
		t.Errorf("agentrun/%s's parent is %s, want %s", id, got, head)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+id+":b.md"); got != "b" {
		t.Errorf("b.md on agentrun/%s: %q", id, got)
	}
}
