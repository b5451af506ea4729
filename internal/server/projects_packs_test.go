package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// result is one run's upload, as a host makes it.
type result struct {
	branch, commit, patch, bundle string
}

// resultsOn makes n results of runs on base (each adds its own file,
// named by tag and its number), in a clone of user, with a bundle and a
// patch each in a directory of tb's.
func resultsOn(tb testing.TB, user, base, tag string, n int) []result {
	tb.Helper()
	host, dir := tb.TempDir(), tb.TempDir()
	testsupport.Git(tb, host, "clone", "-q", user, ".")
	var fi strings.Builder
	out := make([]result, n)
	for i := range out {
		out[i].branch = run.BranchName(run.NewID())
		body := fmt.Sprintf("result %s%d\n", tag, i)
		fmt.Fprintf(&fi, "commit refs/heads/%s\ncommitter R <r@example.com> 1700000000 +0000\ndata 2\nr\nfrom %s\nM 100644 inline %s%d.txt\ndata %d\n%s\n",
			out[i].branch, base, tag, i, len(body), body)
	}
	testsupport.GitInput(tb, host, fi.String(), "fast-import", "--quiet")
	for i := range out {
		r := &out[i]
		r.commit = testsupport.Git(tb, host, "rev-parse", "refs/heads/"+r.branch)
		r.patch = filepath.Join(dir, fmt.Sprintf("%d.patch", i))
		if err := os.WriteFile(r.patch, []byte(testsupport.Git(tb, host, "diff", "--binary", base, r.commit)+"\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
		r.bundle = filepath.Join(dir, fmt.Sprintf("%d.bundle", i))
		testsupport.Git(tb, host, "bundle", "create", "-q", r.bundle, "refs/heads/"+r.branch, "^"+base)
	}
	return out
}

// packsOf counts repo's packs.
func packsOf(tb testing.TB, repo string) int {
	tb.Helper()
	m, err := filepath.Glob(filepath.Join(repo, "objects", "pack", "pack-*.idx"))
	if err != nil {
		tb.Fatal(err)
	}
	return len(m)
}

// TestImportsRollUpPacks: each result upload moves a pack into its
// project; past the project's PackLimit the packs are rolled up in the
// background, so a project's packs stay few however many runs it took.
// Imports at the same time as a roll-up lose nothing: every branch is
// its commit, every object is there, and git fsck finds the project
// sound. Stop waits for the roll-up.
func TestImportsRollUpPacks(t *testing.T) {
	testsupport.Program(t, "git")
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			ctx := context.Background()
			user, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
			p := &server.Projects{Dir: t.TempDir(), PackLimit: 3}
			repo, _, err := p.Import(ctx, "proj", bytes.NewReader(bundleOf(t, user)), "")
			if err != nil {
				t.Fatal(err)
			}
			results := resultsOn(t, user, base, "r", 24)
			var wg sync.WaitGroup
			for _, r := range results {
				imp := func() {
					if _, err := p.ImportResult(ctx, repo, r.bundle, r.patch, r.branch, r.commit, base); err != nil {
						t.Errorf("import %s: %v", r.branch, err)
					}
				}
				if parallel {
					wg.Go(imp)
				} else {
					imp()
				}
			}
			wg.Wait()
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			// Each import added a pack: without the roll-ups there would
			// be 25. A roll-up keeps packs that grow geometrically, which
			// may be more than the limit.
			if n := packsOf(t, repo); n > 6 {
				t.Errorf("%d packs after %d imports with a limit of 3", n, len(results))
			}
			for _, r := range results {
				if got := testsupport.Git(t, repo, "rev-parse", "refs/heads/"+r.branch); got != r.commit {
					t.Errorf("%s is %s, want %s", r.branch, got, r.commit)
				}
			}
			testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
			// A stopped Projects rolls up nothing more.
			more := resultsOn(t, user, base, "more", 5)
			before := packsOf(t, repo)
			for _, r := range more {
				if _, err := p.ImportResult(ctx, repo, r.bundle, r.patch, r.branch, r.commit, base); err != nil {
					t.Fatal(err)
				}
			}
			if n := packsOf(t, repo); n != before+len(more) {
				t.Errorf("%d packs after %d more imports on %d once stopped", n, len(more), before)
			}
		})
	}
}
