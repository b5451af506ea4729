package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// includeEnv is an installation whose repository ignores .env and
// config/local.yml, has both in its working tree, and lists .env in its
// .worktreeinclude (committed).
func includeEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	for p, content := range map[string]string{".gitignore": ".env\nconfig/local.yml\n", ".worktreeinclude": "# local settings\n.env\n"} {
		if err := os.WriteFile(filepath.Join(e.repo, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.Git(t, e.repo, "add", ".gitignore", ".worktreeinclude")
	testsupport.Git(t, e.repo, "commit", "-q", "-m", "ignore local files")
	if err := os.MkdirAll(filepath.Join(e.repo, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{".env": "TOKEN=local\n", "config/local.yml": "port: 1\n"} {
		if err := os.WriteFile(filepath.Join(e.repo, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestIncludedFilesReachTheAgentNeverTheBranch: the files .worktreeinclude
// and --include name are in the agent's workspace, listed in the run's
// provenance (status --json), and never exported, even when the agent
// changes one (the journal says so) and no longer ignores it;
// --no-include turns the file off.
func TestIncludedFilesReachTheAgentNeverTheBranch(t *testing.T) {
	e := includeEnv(t)
	agent := "cat .env config/local.yml > seen.txt; echo TOKEN=agent > .env; echo config/local.yml > .gitignore"
	d, res := e.submitJSON(nil, "--sandbox", "host", "--include", "config/local.yml", "--agent-cmd", agent, "--wait", "t")
	must(t, res, 0)
	if got, err := resultFile(e, d.Commit, "seen.txt"); err != nil || got != "TOKEN=local\nport: 1" {
		t.Fatalf("the agent saw %q (%v)", got, err)
	}
	if out := testsupport.Git(t, e.repo, "ls-tree", "-r", "--name-only", d.Commit); strings.Contains(out, ".env") || strings.Contains(out, "local.yml") {
		t.Fatalf("an included file was exported: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(e.repo, ".env")); string(b) != "TOKEN=local\n" {
		t.Fatalf("the user's .env is now %q", b)
	}
	st := e.run("status", "--json", d.ID)
	must(t, st, 0)
	if err := loadSchemas(t).Validate("status.schema.json", []byte(st.stdout), jsonschema.Options{}); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	var doc struct {
		Workspace  run.WorkspaceSpec `json:"workspace"`
		Provenance run.Provenance    `json:"provenance"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	inc := doc.Provenance.Included
	if len(inc) != 2 || inc[0].Path != ".env" || inc[0].Size != 12 || inc[1].Path != "config/local.yml" || len(inc[0].SHA256) != 64 || inc[0].Mode != "100644" {
		t.Fatalf("provenance %+v", inc)
	}
	if strings.Join(doc.Workspace.Include, ",") != "config/local.yml" {
		t.Fatalf("workspace %+v", doc.Workspace)
	}
	evs, _ := e.store().Events(t.Context(), d.ID, 0)
	said := false
	for _, ev := range evs {
		said = said || ev.Type == run.EventWarning && strings.HasPrefix(ev.Message, ".env: the agent changed this file")
	}
	if !said {
		t.Fatalf("the changed .env is not in the journal: %+v", evs)
	}
	// --no-include: nothing is copied in.
	d, res = e.submitJSON(nil, "--sandbox", "host", "--no-include", "--agent-cmd", "ls -a > ls.txt", "--wait", "t")
	must(t, res, 0)
	if got, _ := resultFile(e, d.Commit, "ls.txt"); strings.Contains(got, ".env") {
		t.Fatalf("--no-include: %q", got)
	}
	if r := e.get(d.ID); len(r.Provenance.Included) != 0 {
		t.Fatalf("--no-include: %+v", r.Provenance.Included)
	}
}

// TestIncludeRefusedCreatesNothing: a pattern that matches a tracked
// file or an untracked file git does not ignore, and conflicting flags,
// are refused at submit (exit 2, a catalog code, no run).
func TestIncludeRefusedCreatesNothing(t *testing.T) {
	e := includeEnv(t)
	if err := os.WriteFile(filepath.Join(e.repo, "notes.txt"), []byte("n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"--include", "README.md"}, `"bad_include"`},
		{[]string{"--include", "notes.txt"}, `"bad_include"`},
		{[]string{"--include", ".env", "--no-include"}, `"conflicting_flags"`},
		{[]string{"--workspace", "cow"}, `"bad_workspace"`},
		{[]string{"--history", "deep"}, `"bad_history"`},
		{[]string{"--workspace", "overlay"}, `"no_overlay"`}, // host mounts none
	} {
		res := e.run(append(append([]string{"submit", "--json", "--sandbox", "host", "--include-dirty", "--agent-cmd", "true"}, c.args...), "t")...)
		if res.code != 2 || !strings.Contains(res.stdout, c.code) {
			t.Errorf("%v: exit %d %s %s", c.args, res.code, res.stdout, res.stderr)
		}
	}
	if ids := e.runIDs(); len(ids) != 0 {
		t.Fatalf("refused submits made runs %v", ids)
	}
}

// TestIncludedFilesInAnOverlay: with the native sandbox mounting an
// overlay, the included file is in the run's upper layer only (never the
// shared lower layer), the agent sees it, and it is not exported.
func TestIncludedFilesInAnOverlay(t *testing.T) {
	e := includeEnv(t)
	res := e.run("submit", "--json", "--workspace", "overlay", "--agent-cmd", "cat .env > seen.txt", "--wait", "t")
	if res.code == 2 && (strings.Contains(res.stdout, "sandbox_preflight") || strings.Contains(res.stdout, "no_overlay")) {
		requireCaps(t, "overlay workspaces in the native sandbox", false, res.stdout)
	}
	must(t, res, 0)
	var d submitDoc
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	r := e.get(d.ID)
	if r.Provenance.Enforced["workspace"] != "overlay" || len(r.Provenance.Included) != 1 {
		t.Fatalf("enforced %v, included %+v", r.Provenance.Enforced, r.Provenance.Included)
	}
	if got, err := resultFile(e, d.Commit, "seen.txt"); err != nil || got != "TOKEN=local" {
		t.Fatalf("the agent saw %q (%v)", got, err)
	}
	if out := testsupport.Git(t, e.repo, "ls-tree", "-r", "--name-only", d.Commit); strings.Contains(out, ".env") {
		t.Fatalf("exported: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "workspace", ".env")); err != nil || string(b) != "TOKEN=local\n" {
		t.Fatalf("upper layer .env: %q %v", b, err)
	}
	layers, _ := filepath.Glob(filepath.Join(e.home, "cache", "layers", "*", "tree", ".env"))
	if len(layers) != 0 {
		t.Fatalf("an included file is in the shared layer: %v", layers)
	}
}
