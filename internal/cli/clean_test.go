package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"

	"github.com/agentrun/agentrun/internal/run"
)

// gitRepo is a real repository with one commit.
type gitRepo struct {
	t    *testing.T
	dir  string
	base string
}

func newGitRepo(t *testing.T) *gitRepo {
	g := &gitRepo{t: t, dir: t.TempDir()}
	g.base = testsupport.RepoAt(t, g.dir, map[string]string{"README": "hello\n"})
	return g
}

func (g *gitRepo) git(args ...string) string {
	g.t.Helper()
	return testsupport.Git(g.t, g.dir, args...)
}

func (g *gitRepo) commitFile(name, text string) string {
	g.t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, name), []byte(text), 0o644); err != nil {
		g.t.Fatal(err)
	}
	g.git("add", name)
	g.git("commit", "-q", "-m", "change "+name)
	return g.git("rev-parse", "HEAD")
}

// runWithBranch makes a finished run whose result commit is on branch
// agentrun/<id> in the repository, as export leaves it.
func runWithBranch(t *testing.T, h *testHome, g *gitRepo) *run.Run {
	r := h.addFinished(func(r *run.Run) { r.Repo, r.Base = g.dir, g.base })
	g.git("checkout", "-q", "-b", r.Branch, g.base)
	commit := g.commitFile("fix.go", "package fix\n")
	g.git("checkout", "-q", "main")
	if _, err := h.st.Update(context.Background(), r.ID, func(r *run.Run) error {
		r.Commit, r.Result.Commit = commit, commit
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := h.st.Get(context.Background(), r.ID)
	return got
}

func (g *gitRepo) hasBranch(b string) bool {
	return testsupport.GitCmd(g.t, g.dir, "rev-parse", "--verify", "-q", "refs/heads/"+b).Run() == nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestCleanDeletesTheRunsOwnBranch(t *testing.T) {
	h := newTestHome(t)
	g := newGitRepo(t)
	r := runWithBranch(t, h, g)
	// A read-only directory in the workspace does not stop the removal.
	ws := filepath.Join(h.st.L.Workspace(r.ID), "ro")
	h.write(filepath.Join(ws, "f"), "x")
	if err := os.Chmod(ws, 0o500); err != nil {
		t.Fatal(err)
	}
	app, out, _ := h.app()
	if err := runClean(context.Background(), &cleanOptions{ID: r.ID[:4], DeleteBranch: true}, app); err != nil {
		t.Fatal(err)
	}
	if exists(h.st.L.RunDir(r.ID)) || g.hasBranch(r.Branch) {
		t.Errorf("run dir or branch left")
	}
	if !strings.Contains(out.String(), "removed") || !strings.Contains(out.String(), "branch "+r.Branch+" deleted") {
		t.Errorf("%s", out.String())
	}
}

func TestCleanKeepsBranchWithoutDeleteBranch(t *testing.T) {
	h := newTestHome(t)
	g := newGitRepo(t)
	r := runWithBranch(t, h, g)
	code, out, _ := h.exec("clean", r.ID, "--json")
	var doc cleanOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if len(doc.Removed) != 1 || doc.Removed[0].BranchDeleted || doc.Removed[0].BranchKept || doc.Removed[0].Branch != r.Branch || !g.hasBranch(r.Branch) || exists(h.st.L.RunDir(r.ID)) {
		t.Errorf("%+v", doc)
	}
	// The human output says the branch stays, and how to delete it.
	r2 := runWithBranch(t, h, g)
	if code, out, _ := h.exec("clean", r2.ID); code != 0 || !strings.Contains(out, "branch "+r2.Branch+" kept") || !strings.Contains(out, "--delete-branch") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// A branch with commits beyond the run's own is kept without --force
// (and the run with it), and deleted with --force.
func TestCleanBranchThatMoved(t *testing.T) {
	h := newTestHome(t)
	g := newGitRepo(t)
	r := runWithBranch(t, h, g)
	g.git("checkout", "-q", r.Branch)
	mine := g.commitFile("more.go", "package more\n")
	g.git("checkout", "-q", "main")

	code, out, _ := h.exec("clean", r.ID, "--delete-branch", "--json")
	if code != 2 || jsonErr(t, out)["code"] != "branch_ahead" {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !g.hasBranch(r.Branch) || g.git("rev-parse", r.Branch) != mine || !exists(h.st.L.RunDir(r.ID)) {
		t.Fatal("the moved branch or the run was removed without --force")
	}
	// --finished keeps it too, and says why.
	code, out, _ = h.exec("clean", "--finished", "--delete-branch", "--json")
	var doc cleanOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if len(doc.Removed) != 0 || len(doc.Kept) != 1 || doc.Kept[0].Code != "branch_ahead" || !strings.Contains(doc.Kept[0].Why, "not at the run's commit") {
		t.Errorf("%+v", doc)
	}
	code, out, _ = h.exec("clean", r.ID, "--delete-branch", "--force", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v %s", code, err, out)
	}
	if g.hasBranch(r.Branch) || exists(h.st.L.RunDir(r.ID)) || !doc.Removed[0].BranchDeleted || doc.Removed[0].Branch != r.Branch {
		t.Errorf("--force: %+v", doc)
	}
}

func TestCleanRefusesActiveRun(t *testing.T) {
	h := newTestHome(t)
	for _, st := range []run.State{run.StateQueued, run.StateRunning, run.StateExporting} {
		r := h.add(func(r *run.Run) { r.State, r.Reason = st, "" })
		h.holdSupervisor(r.ID)
		code, out, _ := h.exec("clean", r.ID, "--force", "--delete-branch", "--json")
		if code != 2 || jsonErr(t, out)["code"] != "run_active" {
			t.Errorf("%s: exit %d %s", st, code, out)
		}
		if !exists(h.st.L.RunJSON(r.ID)) {
			t.Errorf("%s: an active run was removed", st)
		}
	}
}

// A run that looks finished but whose supervisor still holds its lock (it
// is still exiting, or a resume is starting it) is not removed.
func TestCleanWaitsForSupervisorLock(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	lock := h.holdSupervisor(r.ID)
	old := supervisorExitWait
	supervisorExitWait = 100 * time.Millisecond
	defer func() { supervisorExitWait = old }()
	code, out, _ := h.exec("clean", r.ID, "--json")
	if code != 2 || jsonErr(t, out)["code"] != "run_active" || !exists(h.st.L.RunJSON(r.ID)) {
		t.Errorf("exit %d %s", code, out)
	}
	// A supervisor that lets go while clean waits: the run is removed.
	supervisorExitWait = 10 * time.Second
	go func() { time.Sleep(100 * time.Millisecond); lock.Close() }()
	if code, out, _ := h.exec("clean", r.ID, "--json"); code != 0 || exists(h.st.L.RunDir(r.ID)) {
		t.Errorf("after the supervisor exited: exit %d %s", code, out)
	}
}

func TestCleanFinished(t *testing.T) {
	h := newTestHome(t)
	ok := h.addFinished(nil)
	failed := h.add(func(r *run.Run) { r.State, r.Reason = run.StateFailed, run.ReasonChecksFailed })
	cancelled := h.add(func(r *run.Run) { r.State, r.Reason = run.StateCancelled, run.ReasonCancelled })
	interrupted := h.add(func(r *run.Run) { r.State, r.Reason = run.StateInterrupted, run.ReasonInterrupted })
	running := h.add(func(r *run.Run) { r.State, r.Reason = run.StateRunning, "" })
	h.holdSupervisor(running.ID)
	damaged := h.add(nil)
	h.write(h.st.L.RunJSON(damaged.ID), "{")

	code, out, _ := h.exec("clean", "--finished", "--json")
	var doc cleanOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	removed := map[string]bool{}
	for _, rm := range doc.Removed {
		removed[rm.ID] = true
	}
	kept := map[string]string{}
	for _, k := range doc.Kept {
		kept[k.ID] = k.Code
	}
	if len(removed) != 3 || !removed[ok.ID] || !removed[failed.ID] || !removed[cancelled.ID] {
		t.Errorf("removed %v", removed)
	}
	if kept[interrupted.ID] != "interrupted" || kept[running.ID] != "run_active" || kept[damaged.ID] != "run_damaged" {
		t.Errorf("kept %v", kept)
	}
	for id := range removed {
		if exists(h.st.L.RunDir(id)) {
			t.Errorf("%s not removed", id)
		}
	}
	for id := range kept {
		if !exists(h.st.L.RunDir(id)) {
			t.Errorf("%s removed", id)
		}
	}
	code, hout, _ := h.exec("clean", "--finished")
	if code != 0 || !strings.Contains(hout, "kept") || !strings.Contains(hout, "can be resumed") {
		t.Errorf("exit %d:\n%s", code, hout)
	}
}

func TestCleanDamagedRun(t *testing.T) {
	h := newTestHome(t)
	r := h.add(nil)
	h.write(h.st.L.RunJSON(r.ID), `{"id": 7`)
	code, out, _ := h.exec("clean", r.ID, "--json")
	if e := jsonErr(t, out); code != 2 || e["code"] != "run_damaged" || !strings.Contains(e["fix"].(string), "--force") {
		t.Errorf("exit %d %s", code, out)
	}
	if code, out, _ := h.exec("clean", r.ID, "--force"); code != 0 || exists(h.st.L.RunDir(r.ID)) {
		t.Errorf("--force: exit %d %s", code, out)
	}
}

func TestCleanBadInput(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"clean"}, "no_target"},
		{[]string{"clean", r.ID, "--finished"}, "conflicting_flags"},
		{[]string{"clean", r.ID, r.ID}, "usage"},
	} {
		code, out, _ := h.exec(append(c.args, "--json")...)
		if code != 2 || jsonErr(t, out)["code"] != c.code {
			t.Errorf("%v: exit %d %s", c.args, code, out)
		}
	}
	if !exists(h.st.L.RunDir(r.ID)) {
		t.Error("bad input removed a run")
	}
	badIDCases(t, h, "clean")
}

func TestCleanNothing(t *testing.T) {
	h := newTestHome(t)
	code, out, _ := h.exec("clean", "--finished")
	if code != 0 || !strings.Contains(out, "nothing to clean") {
		t.Errorf("exit %d %q", code, out)
	}
}

func TestCleanBranchesFindsOrphans(t *testing.T) {
	h := newTestHome(t)
	g := newGitRepo(t)
	repo, head := g.dir, g.base
	kept := h.addFinished(func(r *run.Run) { r.Repo = repo })
	for _, b := range []string{kept.Branch, run.BranchName(run.NewID()), run.BranchName(run.NewID())} {
		g.git("branch", b, head)
	}
	code, js, _ := h.exec("clean", "--branches", "--repo", repo, "--json")
	var doc cleanOutput
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 || len(doc.Orphans) != 2 {
		t.Fatalf("exit %d %v %s", code, err, js)
	}
	for _, o := range doc.Orphans {
		if o.Branch == kept.Branch || o.Deleted || o.Commit != head {
			t.Fatalf("%+v", o)
		}
	}
	code, out, _ := h.exec("clean", "--branches", "--repo", repo, "--delete-branch")
	if code != 0 || strings.Count(out, "deleted") != 2 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	left := g.git("for-each-ref", "--format=%(refname:short)", "refs/heads/agentrun/")
	if left != kept.Branch {
		t.Fatalf("branches left: %q", left)
	}
	if code, _, _ := h.exec("clean", "--branches", kept.ID); code != 2 {
		t.Fatalf("--branches with an id: exit %d", code)
	}
}
