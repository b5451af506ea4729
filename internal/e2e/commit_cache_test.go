package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestSubmitKeepsWhatItLearnedOfTheBase: a submit refused after reading
// its base (a malformed .agentrun.toml) leaves no commit answers in the
// data directory; a run made keeps them (the base's .gitmodules and
// .agentrun.toml, and the size of its checkout), and the next submit on
// that base, answered from them, runs as the first did.
func TestSubmitKeepsWhatItLearnedOfTheBase(t *testing.T) {
	e := newEnv(t)
	commits := filepath.Join(e.home, "cache", "commits")
	write := func(content, msg string) {
		if err := os.WriteFile(filepath.Join(e.repo, ".agentrun.toml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		testsupport.Git(t, e.repo, "add", ".agentrun.toml")
		testsupport.Git(t, e.repo, "commit", "-q", "-m", msg)
	}
	write("setup = [\n", "broken")
	res := e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	if res.code != 2 || !strings.Contains(res.stdout, "bad_repo_config") || len(e.runIDs()) != 0 {
		t.Fatalf("a malformed .agentrun.toml: exit %d %s", res.code, res.stdout)
	}
	if _, err := os.Stat(commits); !os.IsNotExist(err) {
		t.Fatalf("a refused submit left %s: %v", commits, err)
	}
	write("# no setup\n", "fixed")
	for i := range 2 {
		res := e.run("submit", "--json", "--sandbox", "host", "--no-setup", "--agent-cmd", "echo x > f.txt", "--wait", "t")
		if d := decodeSubmit(t, res); d.Status != "succeeded" {
			t.Fatalf("submit %d: %+v\n%s", i+1, d, res.stderr)
		}
		ents, err := os.ReadDir(commits)
		if err != nil || len(ents) != 2 {
			t.Fatalf("after submit %d, %s holds %d answers (%v), want the checkout's size and .gitmodules (--no-setup reads no .agentrun.toml)", i+1, commits, len(ents), err)
		}
	}
	res = e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "echo y > g.txt", "--wait", "t")
	if d := decodeSubmit(t, res); d.Status != "succeeded" {
		t.Fatalf("reading .agentrun.toml: %+v\n%s", d, res.stderr)
	}
	if ents, _ := os.ReadDir(commits); len(ents) != 3 {
		t.Fatalf("%s holds %d answers, want 3 (the checkout's size, .gitmodules, .agentrun.toml)", commits, len(ents))
	}
}
