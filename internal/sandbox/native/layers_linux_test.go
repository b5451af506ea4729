package native_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

func TestProbeLayers(t *testing.T) {
	b := requireNative(t)
	scratch := t.TempDir()
	if err := b.ProbeLayers(context.Background(), scratch); err != nil {
		requireCap(t, "overlay workspaces", err.Error())
	}
	if ents, _ := os.ReadDir(scratch); len(ents) != 1 || ents[0].Name() != "layers-probe-ok" {
		t.Fatalf("the probe left %v, want only its memo", ents)
	}
	// Remembered: a second probe starts no sandbox (a backend that could
	// not start one says yes); another scratch directory probes again.
	broken := native.New(native.Options{Executable: "/bin/false"}).(*native.Backend)
	if err := broken.ProbeLayers(context.Background(), scratch); err != nil {
		t.Fatalf("a remembered probe: %v", err)
	}
	if err := broken.ProbeLayers(context.Background(), t.TempDir()); err == nil {
		t.Fatal("a probe that cannot start a sandbox succeeded")
	}
}

// TestOverlayWorkspace: the sandbox mounts an overlay workspace's layers
// at /workspace; what the agent changes lands in the upper layer only,
// the lower layer is neither changed nor visible, the mount table inside
// names no host path of the layers, and nothing stays mounted outside.
// overlaySpec is newSpec with an overlay workspace over a checkout of a
// small repository; it skips where overlays cannot be mounted.
func overlaySpec(t *testing.T, b *native.Backend) sandbox.Spec {
	spec, _ := overlaySpecWS(t, b)
	return spec
}

func overlaySpecWS(t *testing.T, b *native.Backend) (sandbox.Spec, workspace.Workspace) {
	t.Helper()
	if err := b.ProbeLayers(context.Background(), t.TempDir()); err != nil {
		requireCap(t, "overlay workspaces", err.Error())
	}
	testsupport.Program(t, "git")
	repo, base := testsupport.Repo(t, map[string]string{"README.md": "base\n", "src/a.go": "package src\n", "src/b.go": "package src\n", "gone.txt": "x\n"})
	spec := newSpec(t)
	root := filepath.Dir(spec.Workspace)
	if err := os.Remove(spec.Workspace); err != nil {
		t.Fatal(err)
	}
	cache := workspace.NewLayerCache(filepath.Join(root, "cache"))
	t.Cleanup(cache.Wait)
	ws, err := workspace.NewOverlay(cache).Create(context.Background(), repo, base, spec.Workspace, filepath.Join(root, "ws-state"))
	if err != nil {
		t.Fatal(err)
	}
	l := ws.(workspace.Layered).Layers()
	t.Cleanup(func() { _ = workspace.RemoveTree(l.Work) }) // before TempDir's: the kernel's work directory is mode 0
	spec.Layers = &sandbox.Layers{Lower: l.Lower, Upper: l.Upper, Work: l.Work}
	return spec, ws
}

func TestOverlayWorkspace(t *testing.T) {
	b := requireNative(t)
	spec, ws := overlaySpecWS(t, b)
	root := filepath.Dir(spec.Workspace)
	script := `set -e
cd /workspace
test "$(cat README.md)" = base
echo more >> README.md
rm gone.txt
rm -r src && mkdir src && echo 'package src // new' > src/c.go
git -c safe.directory='*' status --porcelain | sort | tr '\n' ';'
echo
grep ' /workspace ' /proc/self/mountinfo
`
	res := sh(t, b, spec, script)
	if res.code != 0 {
		t.Fatalf("%v", res)
	}
	out := res.stdout
	if !strings.Contains(out, " - overlay overlay ") || !strings.Contains(out, "lowerdir=/proc/self/fd/") {
		t.Fatalf("/workspace is not the overlay:\n%s", out)
	}
	for _, host := range []string{root, filepath.Base(root), spec.Layers.Lower} {
		if strings.Contains(out, host) {
			t.Fatalf("the mount table inside names %q:\n%s", host, out)
		}
	}
	if !strings.Contains(out, " M README.md;") || !strings.Contains(out, " D gone.txt;") {
		t.Fatalf("git in the sandbox does not see the changes:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Layers.Lower, "README.md")); err != nil || string(b) != "base\n" {
		t.Fatalf("the lower layer changed: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Workspace, "README.md")); err != nil || string(b) != "base\nmore\n" {
		t.Fatalf("the change is not in the upper layer: %q %v", b, err)
	}
	cs, err := ws.Scan(context.Background(), workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs.Changes {
		got[c.Path] = c.Kind
	}
	want := map[string]string{"README.md": "modify", "gone.txt": "delete", "src/a.go": "delete", "src/b.go": "delete", "src/c.go": "add"}
	if len(got) != len(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for p, k := range want {
		if got[p] != k {
			t.Fatalf("changes %v, want %v", got, want)
		}
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), root) {
		t.Fatalf("a mount of the workspace is left on the host:\n%s", mi)
	}
}
