package server_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestProjectCommits: GET /v1/projects/{name}/commits says which of the
// commits asked about the project holds (a base a submit brought, not a
// commit it never saw); a project the server does not keep holds none;
// bad input is refused without touching anything; it needs a token that
// can read runs.
func TestProjectCommits(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, config{data: filepath.Join(dir, "data"), db: "sqlite:" + filepath.Join(dir, "agentrun.db"), token: "bootstrap-secret"})
	repo, base := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
	srv.runID(t, spec("t", "echo x > x.txt", nil), bundleOf(t, repo))
	unknown := strings.Repeat("ab", 20)
	ask := func(who *instance, project string, ids ...string) answer {
		t.Helper()
		return who.get(t, "/v1/projects/{name}/commits?"+url.Values{"have": ids}.Encode(), project)
	}

	a := ask(srv, "default", unknown, base)
	if a.status != http.StatusOK {
		t.Fatalf("commits: %d %s", a.status, a.body)
	}
	if have, _ := a.doc(t)["have"].([]any); len(have) != 1 || have[0] != base {
		t.Errorf("have %v, want only the base %s", have, base)
	}
	if have, _ := ask(srv, "elsewhere", base).doc(t)["have"].([]any); have == nil || len(have) != 0 {
		t.Errorf("a project the server does not keep holds %v", have)
	}
	for _, c := range []struct {
		project string
		ids     []string
	}{
		{"default", nil},
		{"default", []string{"HEAD"}},
		{"default", []string{base[:12]}},
		{"default", slices.Repeat([]string{base}, 65)},
		{"-bad", []string{base}},
	} {
		if a := ask(srv, c.project, c.ids...); a.status != http.StatusBadRequest || a.code(t) != "bad_request" {
			t.Errorf("%s %v: %d %s", c.project, c.ids, a.status, a.body)
		}
	}
	if a := ask(srv.as(""), "default", base); a.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s", a.status, a.body)
	}
	viewer := srv.as(srv.addUser(t, "vera", "viewer"))
	if a := ask(viewer, "default", base); a.status != http.StatusOK {
		t.Errorf("a viewer: %d %s", a.status, a.body)
	}
}
