package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// hostileResult is what a server says about a succeeded run: its branch
// and commit, the patch, and the bundle it serves.
type hostileResult struct {
	branch, commit, patch string
	bundle                []byte
}

// serveResult answers status, result, diff and bundle of run id as
// res says, on a loopback server.
func serveResult(t *testing.T, id, base string, res hostileResult) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := map[string]any{"id": id, "status": "succeeded", "reason": "completed", "branch": res.branch,
			"commit": res.commit, "base_commit": base, "repo": "/srv/project.git"}
		switch strings.TrimPrefix(r.URL.Path, "/v1/runs/"+id) {
		case "", "/result":
		case "/diff":
			doc = map[string]any{"id": id, "patch": res.patch}
		case "/bundle":
			_, _ = w.Write(res.bundle)
			return
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// bundleOf bundles ref of dir without base's history.
func bundleOf(t *testing.T, dir, ref, base string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.bundle")
	testsupport.Git(t, dir, "bundle", "create", "-q", path, ref, "^"+base)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A run's branch from a server reaches the user's repository only as
// the run's base with the run's patch, on a branch of the run's name: a
// commit with another tree, another parent, or a branch called otherwise
// is bad_result, and the repository keeps its refs.
func TestResultFromServerIsChecked(t *testing.T) {
	testsupport.Program(t, "git")
	user, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	// The server's copy: the honest result, and what a server could send instead.
	srvRepo := t.TempDir()
	testsupport.Git(t, srvRepo, "clone", "-q", user, ".")
	id := run.NewID()
	branch := run.BranchName(id)
	commitOn := func(name, from string, files map[string]string) string {
		testsupport.Git(t, srvRepo, "checkout", "-q", "-B", name, from)
		for f, c := range files {
			if err := os.WriteFile(filepath.Join(srvRepo, f), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		testsupport.Git(t, srvRepo, "add", "-A")
		testsupport.Git(t, srvRepo, "commit", "-q", "-m", name)
		return testsupport.Git(t, srvRepo, "rev-parse", "HEAD")
	}
	honest := commitOn(branch, base, map[string]string{"a.txt": "a\nb\n"})
	patch := testsupport.Git(t, srvRepo, "diff", "--binary", base, honest) + "\n"
	honestBundle := bundleOf(t, srvRepo, "refs/heads/"+branch, base)
	extra := commitOn("extra", base, map[string]string{"a.txt": "a\nb\n", "hook.sh": "evil\n"})
	mid := commitOn("mid", base, map[string]string{"m.txt": "m\n"})
	grand := commitOn("grand", mid, map[string]string{"a.txt": "a\nb\n"})
	mainRef := testsupport.Git(t, user, "symbolic-ref", "--short", "HEAD")

	for _, c := range []struct {
		what string
		res  hostileResult
	}{
		{"another tree", func() hostileResult {
			testsupport.Git(t, srvRepo, "branch", "-f", branch, extra)
			return hostileResult{branch, extra, patch, bundleOf(t, srvRepo, "refs/heads/"+branch, base)}
		}()},
		{"another parent", func() hostileResult {
			testsupport.Git(t, srvRepo, "branch", "-f", branch, grand)
			return hostileResult{branch, grand, patch, bundleOf(t, srvRepo, "refs/heads/"+branch, base)}
		}()},
		{"another branch", hostileResult{mainRef, honest, patch, honestBundle}},
		{"another commit than the bundle's", hostileResult{branch, extra, patch, honestBundle}},
		{"a damaged bundle", hostileResult{branch, honest, patch, honestBundle[:len(honestBundle)/2]}},
	} {
		t.Run(c.what, func(t *testing.T) {
			url := serveResult(t, id, base, c.res)
			refs := testsupport.Git(t, user, "for-each-ref")
			h := newTestHome(t)
			h.env["AGENTRUN_SERVER"] = url
			t.Chdir(user)
			code, stdout, _ := h.exec("result", "--json", id)
			if code != 2 || !strings.Contains(stdout, `"code": "bad_result"`) {
				t.Errorf("exit %d:\n%s", code, stdout)
			}
			if got := testsupport.Git(t, user, "for-each-ref"); got != refs {
				t.Errorf("refs changed:\n%s\nwere\n%s", got, refs)
			}
		})
	}

	t.Run("the honest result", func(t *testing.T) {
		url := serveResult(t, id, base, hostileResult{branch, honest, patch, honestBundle})
		h := newTestHome(t)
		h.env["AGENTRUN_SERVER"] = url
		t.Chdir(user)
		if code, stdout, stderr := h.exec("result", id); code != 0 {
			t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
		}
		if got := testsupport.Git(t, user, "rev-parse", branch); got != honest {
			t.Errorf("%s is %s, want %s", branch, got, honest)
		}
		// No hook, nothing checked out: the work tree is as it was.
		if out, _ := exec.Command("git", "-C", user, "status", "--porcelain").Output(); len(out) != 0 {
			t.Errorf("the work tree changed: %s", out)
		}
	})
}
