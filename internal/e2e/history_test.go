package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// treeDigest is a digest of every name, mode and byte under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(rel + "\x00" + fi.Mode().String() + "\x00"))
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			h.Write([]byte(target))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// historyAgent prints the history it sees, then tries to write into the
// user's object store and refs: every write must fail.
const historyAgent = `git log --format=%s | tr '\n' ' '; echo
echo "blame $(git blame -s README.md | wc -l)"
objects=$(cat .git/objects/info/alternates)
if echo x > "$objects/evil" 2>/dev/null; then echo WROTE-OBJECT; fi
if mkdir "$objects/ab" 2>/dev/null; then echo WROTE-DIR; fi
if git --git-dir="$(dirname "$objects")" update-ref refs/heads/evil HEAD 2>/dev/null; then echo WROTE-REF; fi
if echo x > "$(dirname "$objects")/refs/heads/evil2" 2>/dev/null; then echo WROTE-REF2; fi
true`

// TestFullHistoryReadOnly: with --history full the agent's git log and
// git blame walk the repository's whole history, every write into the
// user's object store or refs fails, and the user's repository is byte
// for byte what it was; the run records the mode. So for a repository
// under /tmp, whose objects the native sandbox shows on its own /tmp. The
// default is the base commit alone; the host backend refuses full
// history.
func TestFullHistoryReadOnly(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(testsupport.SearchableDir(t, "/var/tmp", "agentrun-history-"), "repo")
	under := filepath.Join(testsupport.SearchableDir(t, "/tmp", "agentrun-history-"), "repo")
	for _, repo := range []string{outside, under} {
		historyRepo(t, repo)
	}
	e.repo = outside
	res := e.run("submit", "--json", "--sandbox", "host", "--history", "full", "--agent-cmd", "true", "t")
	if res.code != 2 || !strings.Contains(res.stdout, `"no_full_history"`) || len(e.runIDs()) != 0 {
		t.Fatalf("host: exit %d %s", res.code, res.stdout)
	}
	for _, repo := range []string{outside, under} {
		e.repo = repo
		before := treeDigest(t, filepath.Join(repo, ".git"))
		for _, mode := range []string{"overlay", "copy"} {
			fullHistoryRun(t, e, mode)
		}
		if after := treeDigest(t, filepath.Join(repo, ".git")); after != before {
			t.Fatalf("the user's repository %s changed", repo)
		}
	}
	e.repo = outside
	// The default: the base commit only.
	res = e.run("submit", "--json", "--agent-cmd", "git log --format=%s | tr '\\n' ' '", "--wait", "t")
	d := decodeSubmit(t, res)
	log := e.agentLog(d.ID)
	if strings.TrimSpace(string(log)) != "third" || e.get(d.ID).Workspace.History != run.HistoryShallow {
		t.Fatalf("shallow: %q", log)
	}
}

// historyRepo makes a repository at dir with three commits of README.md.
func historyRepo(t *testing.T, dir string) {
	t.Helper()
	testsupport.RepoAt(t, dir, map[string]string{"README.md": "hello\n"})
	for _, msg := range []string{"second", "third"} {
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(msg+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		testsupport.Git(t, dir, "commit", "-q", "-am", msg)
	}
}

// fullHistoryRun runs historyAgent with --history full in a workspace of
// mode on e.repo, and checks what it saw, that it wrote nothing, and what
// the run records.
func fullHistoryRun(t *testing.T, e *env, mode string) {
	t.Helper()
	res := e.run("submit", "--json", "--history", "full", "--workspace", mode, "--agent-cmd", historyAgent, "--wait", "t")
	if res.code == 2 && (strings.Contains(res.stdout, "sandbox_preflight") || strings.Contains(res.stdout, "no_overlay")) {
		requireCaps(t, "the native sandbox with overlay workspaces", false, res.stdout)
	}
	d := decodeSubmit(t, res)
	log := e.agentLog(d.ID)
	if d.Reason != string(run.ReasonNoChanges) || !strings.Contains(string(log), "third second init") || !strings.Contains(string(log), "blame 1") || strings.Contains(string(log), "WROTE") {
		t.Fatalf("%s, %s: %+v\nagent.log:\n%s\nsupervisor:\n%s", e.repo, mode, d, log, e.supervisorLog(d.ID))
	}
	st := e.run("status", "--json", d.ID)
	if err := loadSchemas(t).Validate("status.schema.json", []byte(st.stdout), jsonschema.Options{}); err != nil || !strings.Contains(st.stdout, `"history": "full"`) {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	r := e.get(d.ID)
	if r.Workspace.History != run.HistoryFull || len(r.Workspace.Objects) != 1 || !strings.HasPrefix(r.Provenance.Enforced["workspace"], mode) {
		t.Fatalf("%s: workspace %+v enforced %v", mode, r.Workspace, r.Provenance.Enforced["workspace"])
	}
}

func decodeSubmit(t *testing.T, res result) submitDoc {
	t.Helper()
	var d submitDoc
	if err := jsonUnmarshal(res.stdout, &d); err != nil {
		t.Fatalf("submit output is not JSON (exit %d): %v\n%s\n%s", res.code, err, res.stdout, res.stderr)
	}
	return d
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
