package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestResultHuman(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	app, out, _ := h.app()
	if err := runResult(context.Background(), &resultOptions{ID: r.ID, Patch: true, Now: time.Now()}, app); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"status    succeeded", r.Branch, r.Commit, "1 file, +2 -0", "unit pass", "#1 1m0s, #2 1m0s",
		"duration  3m0s", "1200 prompt", "auth.go | 2 ++", "refused by export (1", "bin/tool", "special file",
		"review: git -C /src/project log -p bbbbbbbbbbbb.." + r.Branch, "diff --git a/auth.go b/auth.go\n+fixed\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("result lacks %q:\n%s", want, s)
		}
	}
}

func TestResultJSON(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	code, out, _ := h.exec("result", r.ID, "--patch", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "status", "reason", "branch", "commit", "patch", "run_dir", "files_changed",
		"insertions", "deletions", "diffstat", "checks", "attempts", "duration", "usage", "refused", "patch_text"} {
		if _, ok := got[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	if got["patch"] != h.st.L.Patch(r.ID) || got["duration"] != "3m0s" || got["patch_text"] != "diff --git a/auth.go b/auth.go\n+fixed\n" {
		t.Errorf("%v", got)
	}
	// Without --patch there is no patch_text.
	_, out, _ = h.exec("result", r.ID, "--json")
	if strings.Contains(out, "patch_text") {
		t.Error("patch_text without --patch")
	}
}

func TestResultNothingExported(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateFailed, run.ReasonNoChanges })
	code, out, _ := h.exec("result", r.ID, "--json")
	var got resultOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if got.Branch != "" || got.Commit != "" || got.Patch != "" || got.Checks == nil || got.Refused == nil {
		t.Errorf("%+v", got)
	}
	code, hout, _ := h.exec("result", r.ID)
	if code != 0 || !strings.Contains(hout, "none (nothing was exported)") {
		t.Errorf("exit %d:\n%s", code, hout)
	}
}

func TestResultPointsAtFailedCheck(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.State, r.Reason, r.Commit, r.Result = run.StateFailed, run.ReasonChecksFailed, "", nil
		r.Attempts = r.Attempts[:1]
	})
	code, out, _ := h.exec("result", r.ID)
	if code != 0 || !strings.Contains(out, "why check unit failed: agentrun logs "+r.ID+" --check unit --attempt 1") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = h.exec("status", r.ID)
	if code != 0 || !strings.Contains(out, "agentrun resume "+r.ID) {
		t.Errorf("status of a failed run does not suggest resume:\n%s", out)
	}
}

func TestResultOfActiveRun(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateRunning, "" })
	h.holdSupervisor(r.ID)
	code, out, _ := h.exec("result", r.ID, "--json")
	if code != 2 || jsonErr(t, out)["code"] != "not_finished" {
		t.Errorf("exit %d: %s", code, out)
	}
}

func TestResultBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "result")
}

// result says what became of the run's branch since the export: where
// the export left it, moved by the user, or deleted (and how to bring it
// back); the review line then names the run's commit.
func TestResultSaysWhereTheBranchIs(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	testsupport.Git(t, repo, "checkout", "-q", "-b", "work")
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testsupport.Git(t, repo, "commit", "-qam", "result")
	commit := testsupport.Git(t, repo, "rev-parse", "HEAD")
	testsupport.Git(t, repo, "checkout", "-q", base)
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.Repo, r.Base, r.Commit, r.Result.Commit = repo, base, commit, commit
	})
	testsupport.Git(t, repo, "branch", r.Branch, commit)
	testsupport.Git(t, repo, "branch", "-D", "-q", "work")
	for _, c := range []struct {
		do    []string
		state string
		human []string
	}{
		{nil, "at_commit", []string{"branch    " + r.Branch + "\n", "review: git -C " + repo + " log -p " + base[:12] + ".." + r.Branch + "\n"}},
		{[]string{"branch", "-f", r.Branch, base}, "moved", []string{r.Branch + " (moved since the export: now at " + base[:12] + ")",
			"log -p " + base[:12] + ".." + commit[:12] + "\n"}},
		{[]string{"branch", "-D", "-q", r.Branch}, "deleted", []string{"(deleted: 'git branch " + r.Branch + " " + commit[:12] + "' brings it back",
			"log -p " + base[:12] + ".." + commit[:12] + "\n"}},
	} {
		if c.do != nil {
			testsupport.Git(t, repo, c.do...)
		}
		code, out, _ := h.exec("result", r.ID, "--json")
		var got resultOutput
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.BranchState != c.state {
			t.Errorf("%s: exit %d, %v, branch_state %q:\n%s", c.state, code, err, got.BranchState, out)
		}
		_, out, _ = h.exec("result", r.ID)
		for _, want := range c.human {
			if !strings.Contains(out, want) {
				t.Errorf("%s: result lacks %q:\n%s", c.state, want, out)
			}
		}
	}
	// Its repository gone, result says nothing of the branch's state.
	if err := os.RemoveAll(repo); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := h.exec("result", r.ID, "--json"); code != 0 || strings.Contains(out, "branch_state") {
		t.Errorf("a run whose repository is gone: exit %d:\n%s", code, out)
	}
}
