package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestDroppedRunsArePruned: the results of the runs that left a host's
// cache of a project are pruned every cachePruneEvery runs, not before;
// what the kept bases and the branches of the runs still here reach
// stays, and so does an object nothing names yet that is younger than
// the grace (an export under way).
func TestDroppedRunsArePruned(t *testing.T) {
	testsupport.Program(t, "git")
	ctx := context.Background()
	w := &Remote{Data: t.TempDir()}
	repo := w.projectRepo("proj")
	user, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	testsupport.Git(t, t.TempDir(), "init", "-q", "--bare", repo)
	testsupport.Git(t, repo, "fetch", "-q", user, "HEAD:refs/agentrun/bases/"+base)
	// A run still here, one that left long ago, and one that left
	// before its objects were an hour old.
	here := commitLoose(t, repo, base, "here.txt", "agentrun/here")
	left := commitLoose(t, repo, base, "left.txt", "agentrun/left")
	young := commitLoose(t, repo, base, "young.txt", "agentrun/young")
	for _, id := range []string{here, left} {
		age(t, repo, id, 2*time.Hour)
	}
	w.dropBranch(ctx, "proj", "agentrun/left")
	w.dropBranch(ctx, "proj", "agentrun/young")
	has := func(id string) bool { return testsupport.GitCmd(t, repo, "cat-file", "-e", id).Run() == nil }
	for range cachePruneEvery - 3 {
		w.dropBranch(ctx, "proj", "agentrun/gone")
	}
	if !has(left) {
		t.Fatalf("pruned after %d runs left, before %d", cachePruneEvery-1, cachePruneEvery)
	}
	w.dropBranch(ctx, "proj", "agentrun/gone")
	if has(left) {
		t.Errorf("%s, of a run that left, is still in the cache after %d runs left", left, cachePruneEvery)
	}
	if !has(here) || !has(young) || !has(base) {
		t.Errorf("pruned too much: the run still here %v, the young object %v, the base %v", has(here), has(young), has(base))
	}
	testsupport.Git(t, repo, "fsck", "--connectivity-only", "--no-dangling")
}

// commitLoose writes a commit on base adding file, as loose objects in
// repo as a host's export does, on branch.
func commitLoose(t *testing.T, repo, base, file, branch string) string {
	t.Helper()
	blob := testsupport.GitInput(t, repo, file+"\n", "hash-object", "-w", "--stdin")
	tree := testsupport.GitInput(t, repo, testsupport.Git(t, repo, "ls-tree", base)+"\n100644 blob "+blob+"\t"+file+"\n", "mktree")
	id := testsupport.GitInput(t, repo, "result\n", "commit-tree", tree, "-p", base)
	testsupport.Git(t, repo, "update-ref", "refs/heads/"+branch, id)
	return id
}

// age sets the time of commit id's loose objects (its own, its tree's and
// their new blobs) d back.
func age(t *testing.T, repo, id string, d time.Duration) {
	t.Helper()
	then := time.Now().Add(-d)
	for _, o := range strings.Fields(testsupport.Git(t, repo, "rev-list", "--objects", "--no-object-names", id, "--not", "--glob=refs/agentrun/bases/*")) {
		p := filepath.Join(repo, "objects", o[:2], o[2:])
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
	}
}
