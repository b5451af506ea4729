package native_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// snapshot maps each path under dir to its content ("/" for a directory,
// "->target" for a symlink, "special" for anything else).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			m[rel] = "/"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "->" + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = string(b)
		default:
			m[rel] = "special"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameSnapshot(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestStackedLayers is a setup layer's life in the sandbox: a setup on the
// checkout writes an overlay's upper layer (an added file, a deleted base
// file, a directory made again); a run then stacks that layer over the
// checkout (Layers.Above) under its own upper layer, sees the setup's
// tree, and writes only its own upper layer: neither the checkout nor the
// setup layer changes.
func TestStackedLayers(t *testing.T) {
	b := requireNative(t)
	if err := b.ProbeLayers(context.Background(), t.TempDir()); err != nil {
		requireCap(t, "overlay workspaces", err.Error())
	}
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"checkout", "setup", "setup-work", "work"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = workspace.RemoveTree(dirs["setup-work"]); _ = workspace.RemoveTree(dirs["work"]) })
	for p, s := range map[string]string{"README.md": "base\n", "gone.txt": "x\n", "deps/old.txt": "old\n"} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dirs["checkout"], p)), 0o755)
		if err := os.WriteFile(filepath.Join(dirs["checkout"], p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkout := snapshot(t, dirs["checkout"])

	setup := newSpec(t)
	setup.Workspace = dirs["setup"]
	setup.Layers = &sandbox.Layers{Lower: dirs["checkout"], Upper: dirs["setup"], Work: dirs["setup-work"]}
	if res := sh(t, b, setup, `set -e; cd /workspace; echo fetched > fetched.txt; rm gone.txt; rm -r deps; mkdir deps; echo new > deps/new.txt`); res.code != 0 {
		t.Fatalf("setup: %v", res)
	}
	layer := snapshot(t, dirs["setup"])

	runSpec := newSpec(t)
	runSpec.Layers = &sandbox.Layers{Lower: dirs["checkout"], Above: []string{dirs["setup"]}, Upper: runSpec.Workspace, Work: dirs["work"]}
	res := sh(t, b, runSpec, `set -e; cd /workspace
test "$(cat fetched.txt)" = fetched
test ! -e gone.txt
test "$(cat deps/new.txt)" = new && test ! -e deps/old.txt
echo agent >> fetched.txt; echo agent > agent.txt; rm deps/new.txt; echo changed > README.md`)
	if res.code != 0 {
		t.Fatalf("run: %v", res)
	}
	if got := snapshot(t, dirs["checkout"]); !sameSnapshot(got, checkout) {
		t.Fatalf("the checkout changed: %v, was %v", got, checkout)
	}
	if got := snapshot(t, dirs["setup"]); !sameSnapshot(got, layer) {
		t.Fatalf("the setup layer changed: %v, was %v", got, layer)
	}
	up := snapshot(t, runSpec.Workspace)
	if up["agent.txt"] != "agent\n" || up["fetched.txt"] != "fetched\nagent\n" || up["README.md"] != "changed\n" || up["deps/new.txt"] != "special" {
		t.Fatalf("the run's upper layer: %v", up)
	}
}
