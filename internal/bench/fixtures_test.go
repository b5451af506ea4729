package bench

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/bench/fixtures"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// nativeScorer is a Scorer over the native backend, required where
// capabilities are (CI); logs under dir.
func nativeScorer(t *testing.T) *Scorer {
	t.Helper()
	testsupport.Program(t, "git")
	b := native.New(native.Options{Executable: testsupport.Agentrun(t)})
	if runtime.GOOS != "linux" {
		testsupport.Require(t, "the native sandbox", false, "not Linux")
	}
	if err := b.Preflight(context.Background()); err != nil {
		testsupport.Require(t, "the native sandbox", false, "%v", err)
	}
	return &Scorer{Backends: map[string]sandbox.Backend{b.Name(): b}, Workspaces: workspace.NewCheckout(),
		TempDir: testsupport.ShortDir(t), Path: "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"}
}

// Our own fixtures: at least 10, in several languages, each one whose
// acceptance fails on its base and passes on its solution, in the native
// sandbox the bench judges in.
func TestOurFixtures(t *testing.T) {
	t.Parallel()
	fs, err := Discover(fixtures.FS, ".", "", "builtin")
	if err != nil {
		t.Fatal(err)
	}
	langs := map[string]bool{}
	for _, f := range fs {
		langs[f.Language] = true
		if len(f.Solution) == 0 {
			t.Errorf("%s has no solution", f.Name)
		}
	}
	if len(fs) < 10 || len(langs) < 5 {
		t.Fatalf("%d fixtures in %d languages, want at least 10 in 5", len(fs), len(langs))
	}
	s := nativeScorer(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, f := range fs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := CheckFixture(context.Background(), s, f, native.Name, filepath.Join(dir, f.Name))
			if err != nil {
				t.Errorf("%s: %v", f.Name, err)
				return
			}
			if !c.OK {
				t.Errorf("%s: %s\nbase (%s): %s\nsolution (%s): %s", f.Name, c.Problem, c.Base, c.BaseOutput, c.Solution, c.SolutionOutput)
			}
		})
	}
	wg.Wait()
}
