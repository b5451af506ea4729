package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestImportResultIsChecked: a host's upload of a run's branch reaches the
// project only as the run's base with the run's patch, on the run's
// branch. A commit with another tree or another parent, a bundle of
// another commit, a damaged bundle or a patch that does not apply is
// bad_result, and the project keeps its refs and gains none of the
// upload's objects. The honest result's objects move into the project
// whole (loose, and as a pack when there are many), git fsck finds the
// project sound, and undo puts the branch back. For both object formats.
func TestImportResultIsChecked(t *testing.T) {
	testsupport.Program(t, "git")
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) { importResultIsChecked(t, format) })
	}
}

func importResultIsChecked(t *testing.T, format string) {
	ctx := context.Background()
	user, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"}, "--object-format="+format)
	p := &server.Projects{Dir: t.TempDir()}
	repo, got, err := p.Import(ctx, "proj", bytes.NewReader(bundleOf(t, user)), "")
	if err != nil || got != base {
		t.Fatalf("import the base: %s, %v", got, err)
	}
	// The same base again takes nothing from its bundle.
	if _, again, err := p.Import(ctx, "proj", bytes.NewReader(bundleOf(t, user)), ""); err != nil || again != base {
		t.Fatalf("import the base again: %s, %v", again, err)
	}

	// The host's cache of the project, where its runs' branches are made.
	host := t.TempDir()
	testsupport.Git(t, host, "clone", "-q", user, ".")
	commitOn := func(name, from string, files map[string]string) string {
		testsupport.Git(t, host, "checkout", "-q", "-B", name, from)
		for f, c := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(host, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(host, f), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		testsupport.Git(t, host, "add", "-A")
		testsupport.Git(t, host, "commit", "-q", "-m", name)
		return testsupport.Git(t, host, "rev-parse", "HEAD")
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bundle := func(name, ref string) string {
		out, err := testsupport.GitCmd(t, host, "bundle", "create", "-q", "-", ref, "^"+base).Output()
		if err != nil {
			t.Fatalf("bundle %s: %v", ref, err)
		}
		return write(name, out)
	}
	refs := func() string { return testsupport.Git(t, repo, "for-each-ref") }
	has := func(id string) bool {
		return testsupport.GitCmd(t, repo, "cat-file", "-e", id).Run() == nil
	}

	branch := run.BranchName(run.NewID())
	honest := commitOn(branch, base, map[string]string{"a.txt": "a\nb\n"})
	patch := write("honest.patch", []byte(testsupport.Git(t, host, "diff", "--binary", base, honest)+"\n"))
	honestBundle := bundle("honest.bundle", "refs/heads/"+branch)
	extra := commitOn("extra", base, map[string]string{"a.txt": "a\nb\n", "hook.sh": "evil\n"})
	mid := commitOn("mid", base, map[string]string{"m.txt": "m\n"})
	grand := commitOn("grand", mid, map[string]string{"a.txt": "a\nb\n"})
	damaged, err := os.ReadFile(honestBundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, bundle, patch, commit string
		foreign                     []string // objects of the upload the project must not gain
	}{
		{"another tree", func() string {
			testsupport.Git(t, host, "branch", "-f", branch, extra)
			return bundle("tree.bundle", "refs/heads/"+branch)
		}(), patch, extra, []string{extra}},
		{"another parent", func() string {
			testsupport.Git(t, host, "branch", "-f", branch, grand)
			return bundle("parent.bundle", "refs/heads/"+branch)
		}(), patch, grand, []string{grand, mid}},
		{"another commit than the bundle's", honestBundle, patch, extra, []string{honest, extra}},
		{"a damaged bundle", write("damaged.bundle", damaged[:len(damaged)-20]), patch, honest, []string{honest}},
		{"a patch that does not apply", honestBundle, write("other.patch", []byte("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+x\n")), honest, []string{honest}},
	} {
		t.Run(c.what, func(t *testing.T) {
			before := refs()
			_, err := p.ImportResult(ctx, repo, c.bundle, c.patch, branch, c.commit, base)
			if ce, ok := catalog.As(err); !ok || ce.Code != catalog.BadResult.Code {
				t.Fatalf("got %v, want bad_result", err)
			}
			if after := refs(); after != before {
				t.Errorf("refs changed:\n%s\nwere\n%s", after, before)
			}
			for _, id := range c.foreign {
				if has(id) {
					t.Errorf("the project gained %s", id)
				}
			}
		})
	}

	t.Run("the honest result", func(t *testing.T) {
		testsupport.Git(t, host, "branch", "-f", branch, honest)
		undo, err := p.ImportResult(ctx, repo, honestBundle, patch, branch, honest, base)
		if err != nil {
			t.Fatal(err)
		}
		if got := testsupport.Git(t, repo, "rev-parse", "refs/heads/"+branch); got != honest {
			t.Fatalf("branch at %s, want %s", got, honest)
		}
		testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
		undo()
		if err := testsupport.GitCmd(t, repo, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Run(); err == nil {
			t.Error("undo left the branch")
		}
	})

	t.Run("a result of many objects", func(t *testing.T) {
		// More objects than fetch unpacks: they arrive as a pack.
		files := map[string]string{}
		for i := range 150 {
			files[fmt.Sprintf("d%d/f%d.txt", i%7, i)] = fmt.Sprintf("file %d\n", i)
		}
		big := run.BranchName(run.NewID())
		commit := commitOn(big, base, files)
		p2 := write("big.patch", []byte(testsupport.Git(t, host, "diff", "--binary", base, commit)+"\n"))
		if _, err := p.ImportResult(ctx, repo, bundle("big.bundle", "refs/heads/"+big), p2, big, commit, base); err != nil {
			t.Fatal(err)
		}
		if packs, _ := filepath.Glob(filepath.Join(repo, "objects", "pack", "pack-*.idx")); len(packs) == 0 {
			t.Error("no pack moved into the project")
		}
		testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
		if got := testsupport.Git(t, repo, "ls-tree", "-r", "--name-only", commit); strings.Count(got, "\n")+1 != 151 {
			t.Errorf("the project's tree of %s lists %d files", commit, strings.Count(got, "\n")+1)
		}
	})

	t.Run("a result on a run's branch", func(t *testing.T) {
		// A run whose base is an earlier run's result (a branch of the
		// project, which no ref under refs/agentrun/bases/ names): the
		// quarantine's check walks on to a kept base.
		first, second := run.BranchName(run.NewID()), run.BranchName(run.NewID())
		r1 := commitOn(first, base, map[string]string{"one.txt": "1\n"})
		p1 := write("one.patch", []byte(testsupport.Git(t, host, "diff", "--binary", base, r1)+"\n"))
		if _, err := p.ImportResult(ctx, repo, bundle("one.bundle", "refs/heads/"+first), p1, first, r1, base); err != nil {
			t.Fatal(err)
		}
		r2 := commitOn(second, r1, map[string]string{"two.txt": "2\n"})
		p2 := write("two.patch", []byte(testsupport.Git(t, host, "diff", "--binary", r1, r2)+"\n"))
		out, err := testsupport.GitCmd(t, host, "bundle", "create", "-q", "-", "refs/heads/"+second, "^"+r1).Output()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.ImportResult(ctx, repo, write("two.bundle", out), p2, second, r2, r1); err != nil {
			t.Fatal(err)
		}
		if got := testsupport.Git(t, repo, "rev-parse", "refs/heads/"+second); got != r2 {
			t.Fatalf("branch at %s, want %s", got, r2)
		}
		testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
	})

	t.Run("a new base", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(user, "b.txt"), []byte("b\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		testsupport.Git(t, user, "add", "-A")
		testsupport.Git(t, user, "commit", "-q", "-m", "next")
		next := testsupport.Git(t, user, "rev-parse", "HEAD")
		_, got, err := p.Import(ctx, "proj", bytes.NewReader(bundleOf(t, user)), "")
		if err != nil || got != next {
			t.Fatalf("import %s: %s, %v", next, got, err)
		}
		if kept := testsupport.Git(t, repo, "rev-parse", "refs/agentrun/bases/"+next); kept != next {
			t.Errorf("kept %s, want %s", kept, next)
		}
		testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
	})
}

// BenchmarkImportResult: a host's upload of a one-file result, into a
// project that holds no other run's branch, one that holds 3,000 (each
// run leaves its branch), and one where 1,000 earlier imports each left
// their pack, as they left them and rolled up (what an import past the
// project's PackLimit has done): the quarantine's check must not grow
// with the runs.
func BenchmarkImportResult(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name            string
		branches, packs int
		rollUp          bool
	}{
		{"branches=0", 0, 0, false},
		{"branches=3000", 3000, 0, false},
		{"packs=1000/as-left", 0, 1000, false},
		{"packs=1000/rolled-up", 0, 1000, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			branches := c.branches
			user, base := testsupport.Repo(b, map[string]string{"a.txt": "a\n"})
			p := &server.Projects{Dir: b.TempDir(), PackLimit: -1}
			out, err := testsupport.GitCmd(b, user, "bundle", "create", "-q", "-", "HEAD").Output()
			if err != nil {
				b.Fatal(err)
			}
			repo, _, err := p.Import(ctx, "proj", bytes.NewReader(out), "")
			if err != nil {
				b.Fatal(err)
			}
			if c.packs > 0 {
				// Earlier results, each in its own pack as its import
				// left it: made in a scratch repository (one pack, so
				// that each pack-objects there costs the same), then
				// packed one by one into the project.
				scratch := b.TempDir()
				testsupport.Git(b, scratch, "init", "-q", "--bare")
				testsupport.Git(b, scratch, "fetch", "-q", user, "HEAD:refs/heads/base")
				var fi strings.Builder
				for i := range c.packs {
					fmt.Fprintf(&fi, "commit refs/heads/agentrun/old%d\ncommitter R <r@example.com> 1700000000 +0000\ndata 2\nr\nfrom %s\nM 100644 inline r.txt\ndata %d\n%d\n\n",
						i, base, len(strconv.Itoa(i))+1, i)
				}
				testsupport.GitInput(b, scratch, fi.String(), "fast-import", "--quiet")
				for i := range c.packs {
					cmd := testsupport.GitCmd(b, scratch, "pack-objects", "-q", "--revs", filepath.Join(repo, "objects", "pack", "pack"))
					cmd.Stdin = strings.NewReader(fmt.Sprintf("refs/heads/agentrun/old%d\n^%s\n", i, base))
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("pack-objects: %v: %s", err, out)
					}
				}
				if c.rollUp {
					if err := p.RollUp(ctx, repo); err != nil {
						b.Fatal(err)
					}
				}
			}
			host := b.TempDir()
			testsupport.Git(b, host, "clone", "-q", user, ".")
			if branches > 0 {
				// Other runs' results, one commit each on base, made by one
				// fast-import and pushed to the project.
				var fi strings.Builder
				for i := range branches {
					fmt.Fprintf(&fi, "commit refs/heads/agentrun/old%d\ncommitter R <r@example.com> 1700000000 +0000\ndata 2\nr\nfrom %s\nM 100644 inline r.txt\ndata %d\n%d\n\n",
						i, base, len(strconv.Itoa(i))+1, i)
				}
				testsupport.GitInput(b, host, fi.String(), "fast-import", "--quiet")
				testsupport.Git(b, host, "push", "-q", repo, "refs/heads/agentrun/*:refs/heads/agentrun/*")
			}
			branch := run.BranchName(run.NewID())
			testsupport.Git(b, host, "checkout", "-q", "-b", branch, base)
			if err := os.WriteFile(filepath.Join(host, "b.txt"), []byte("b\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			testsupport.Git(b, host, "add", "-A")
			testsupport.Git(b, host, "commit", "-q", "-m", "result")
			commit := testsupport.Git(b, host, "rev-parse", "HEAD")
			dir := b.TempDir()
			patch := filepath.Join(dir, "result.patch")
			if err := os.WriteFile(patch, []byte(testsupport.Git(b, host, "diff", "--binary", base, commit)+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			bundle := filepath.Join(dir, "result.bundle")
			testsupport.Git(b, host, "bundle", "create", "-q", bundle, "refs/heads/"+branch, "^"+base)
			for b.Loop() {
				undo, err := p.ImportResult(ctx, repo, bundle, patch, branch, commit, base)
				if err != nil {
					b.Fatal(err)
				}
				undo()
			}
			b.ReportMetric(float64(packsOf(b, repo)), "packs")
		})
	}
}
