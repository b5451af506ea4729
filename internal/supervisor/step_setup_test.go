package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// withSetup plans and stores a run on the host backend with a setup
// command, and returns its Supervisor (run in this process).
func withSetup(t *testing.T, repo, setup, agentCmd string, checks []run.CheckSpec) *Supervisor {
	t.Helper()
	st, l := newStore(t)
	svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}}
	r, _, err := svc.Plan(context.Background(), submit.Request{Repo: repo, Task: "t", AgentCmd: agentCmd, Checks: checks, Setup: setup,
		Attempts: 1, Timeout: time.Minute, Sandbox: "host", Export: run.ExportConfig{MaxFiles: 100, MaxBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	lk, err := flock.New(l.Home).Acquire(context.Background(), r.ID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Release() })
	d := testDeps(st, l)
	t.Cleanup(d.Layers.Wait)
	return &Supervisor{Deps: d, ID: r.ID, MaxParallel: 1, Lease: lk}
}

func TestSetupFailureEndsTheRunAndCachesNothing(t *testing.T) {
	s := withSetup(t, gitRepo(t), "echo broken-dependency; exit 3", "echo agent > agent.txt", nil)
	_ = s.Run(context.Background())
	r, _ := s.Store.Get(context.Background(), s.ID)
	if r.State != run.StateFailed || r.Reason != run.ReasonSetupFailed || !strings.Contains(r.Message, "the setup command failed") ||
		!strings.Contains(r.Message, "status 3") || len(r.Attempts) != 0 {
		t.Fatalf("%s/%s %q, %d attempts", r.State, r.Reason, r.Message, len(r.Attempts))
	}
	if b, err := os.ReadFile(s.Layout.SetupLog(s.ID)); err != nil || !strings.Contains(string(b), "broken-dependency") {
		t.Fatalf("setup log: %q %v", b, err)
	}
	if l, err := s.Layers.ListSetup(nil); err != nil || len(l) != 0 {
		t.Fatalf("cached: %+v %v", l, err)
	}
}

func TestSetupLayerUnderACopyWorkspace(t *testing.T) {
	setup := "echo dep > dep.txt && mkdir -p \"$HOME/go/pkg/mod\" && echo m > \"$HOME/go/pkg/mod/m\""
	checks := []run.CheckSpec{{Name: "env", Command: "test \"$(cat dep.txt)\" = dep && test \"$(cat \"$GOMODCACHE/m\")\" = m && test -d \"$AGENTRUN_SETUP_HOME\""}}
	s := withSetup(t, gitRepo(t), setup, "cat dep.txt > seen.txt", checks)
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Store.Get(context.Background(), s.ID)
	if r.State != run.StateSucceeded || r.Setup == nil || r.Setup.Layer == "" || r.Setup.Cached {
		t.Fatalf("%s/%s %q %+v", r.State, r.Reason, r.Message, r.Setup)
	}
	// The agent's file is exported; what the setup made is not the
	// agent's work, but a copy workspace has it as a new file unless it is
	// ignored (README: Setup snapshots).
	patch, _ := os.ReadFile(r.Patch)
	if !strings.Contains(string(patch), "seen.txt") || !strings.Contains(string(patch), "+dep") {
		t.Fatalf("patch:\n%s", patch)
	}
	if l, ok := s.Layers.SetupLayerOf(s.Layout.WorkspaceState(s.ID)); !ok || l.Key != r.Setup.Layer || l.Info.Mode != workspace.SetupCopy {
		t.Fatalf("the workspace's setup layer: %+v %v", l, ok)
	}
}

// A copy workspace gets the setup layer once: a resumed run's workspace
// keeps what the agent did over it.
func TestSetupAppliedOnce(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"README.md": "base\n"})
	c := workspace.NewLayerCache(filepath.Join(t.TempDir(), "layers"))
	t.Cleanup(c.Wait)
	l, err := c.AcquireSetup(context.Background(), workspace.SetupInput{Commit: base, Command: "x"}, t.TempDir(),
		func(ctx context.Context, b workspace.SetupBuild) (string, error) {
			if err := os.Remove(b.Tree); err != nil {
				return "", err
			}
			if _, err := workspace.NewCheckout().Create(ctx, repo, base, b.Tree, filepath.Join(b.Scratch, "state")); err != nil {
				return "", err
			}
			return workspace.SetupCopy, os.WriteFile(filepath.Join(b.Tree, "dep.txt"), []byte("dep\n"), 0o644)
		})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir, state := filepath.Join(root, "ws"), filepath.Join(root, "state")
	if _, err := workspace.NewCheckout().Create(context.Background(), repo, base, dir, state); err != nil {
		t.Fatal(err)
	}
	if err := applySetup(context.Background(), l, dir, state); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.txt"), []byte("agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := applySetup(context.Background(), l, dir, state); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"dep.txt", "agent.txt", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
