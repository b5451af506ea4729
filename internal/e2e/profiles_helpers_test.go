package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// opencode's grep and glob tools run rg from PATH, else the copy opencode
// downloaded for itself into its data directory (from GitHub: a sandbox
// without network cannot). Here the submitting PATH has no rg.
//   - In neither place: submit warns, naming rg, where it looked and the
//     fix; the run goes on, and the search's result never reaches the
//     model (the test's PATH truly lacks rg).
//   - In opencode's data directory ($XDG_DATA_HOME/opencode/bin, as
//     opencode leaves it): submit records it, the sandbox shows it and
//     puts its directory first on the CLI's PATH, and the search works.
func TestProfileFindsItsHelper(t *testing.T) {
	const marker = "needle-77c1e0"
	for _, own := range []bool{false, true} {
		t.Run(map[bool]string{false: "nowhere", true: "opencode's own"}[own], func(t *testing.T) {
			bin, e, ok := profileEnv(t, "opencode", "opencode")
			if !ok {
				return
			}
			noRG := pathWithout(t, "rg")
			data := testsupport.SearchableDir(t, os.TempDir(), "agentrun-data-")
			if own {
				copyProgram(t, "rg", filepath.Join(data, "opencode", "bin", "rg"))
			}
			found, offered, srv := e.searchNeedle(marker)
			d, res := e.submitJSON([]string{"PATH=" + noRG + ":" + filepath.Dir(bin), "XDG_DATA_HOME=" + data, "SCRIPTED_KEY=" + realKey},
				"--agent", "opencode", "--model", "test-model", "--model-server", "scripted", "--attempts", "1", "--timeout", "3m",
				"--ro", noRG, "--wait", "Find the needle")
			if res.code != 1 || d.Reason != "no_changes" || d.Warnings == nil {
				t.Fatalf("exit %d, want 1 (no_changes): %s %s (%d requests)", res.code, res.stdout, res.stderr, len(srv.Requests()))
			}
			warned := slices.ContainsFunc(*d.Warnings, func(w string) bool {
				return strings.Contains(w, "rg (ripgrep, which opencode's grep and glob tools run) is neither on PATH nor in "+filepath.Join(data, "opencode", "bin")) &&
					strings.Contains(w, "those tools fail in the sandbox; install ripgrep")
			})
			if warned == own {
				t.Fatalf("warnings %q (opencode's own rg: %v)", *d.Warnings, own)
			}
			if found() != own {
				t.Fatalf("the search's result reached the model: %v, want %v (tools: %v)\nagent.log:\n%s", found(), own, offered(), e.agentLog(d.ID))
			}
			r, err := e.store().Get(t.Context(), d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(data, "opencode", "bin", "rg"); own != slices.Equal(r.Agent.Helpers, []string{want}) || own != slices.Contains(r.Sandbox.ReadOnlyPaths, want) {
				t.Fatalf("helpers %q, read-only paths %q (opencode's own rg: %v)", r.Agent.Helpers, r.Sandbox.ReadOnlyPaths, own)
			}
		})
	}
}

// pathWithout is a directory of links to every program of /usr/bin but
// name: a PATH (with the directory shown read-only) on which the system's
// programs run and name is not found.
func pathWithout(t *testing.T, name string) string {
	t.Helper()
	dir := testsupport.SearchableDir(t, os.TempDir(), "agentrun-path-")
	entries, err := os.ReadDir("/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if ent.Name() != name {
			if err := os.Symlink(filepath.Join("/usr/bin", ent.Name()), filepath.Join(dir, ent.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// copyProgram copies the program name found on this machine's PATH to
// dst, mode 0755.
func copyProgram(t *testing.T, name, dst string) {
	t.Helper()
	src, err := exec.LookPath(name)
	testsupport.Require(t, name, err == nil, "not on PATH (.ci/run installs it)")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
