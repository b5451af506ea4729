package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmeInstall runs the README's install step (make install into a
// temporary GOBIN, from this checkout) and checks that the installed binary
// names the commit it was built from.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Install\n")
	if !ok || !strings.Contains(fenced(t, section, "sh"), "make install") {
		t.Fatal("the README's install block no longer says make install")
	}
	for _, tool := range []string{"make", "git", "go"} {
		testsupport.Program(t, tool)
	}
	gobin := t.TempDir()
	cmd := exec.Command("make", "-s", "install", "GOBIN="+gobin)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "agentrun"), "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Commit string }
	if err := json.Unmarshal(out, &v); err != nil || v.Version == "" {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join("..", ".git")); err == nil && len(v.Commit) != 40 {
		t.Fatalf("built from a git checkout, yet no commit: %s", out)
	}
}
