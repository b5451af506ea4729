package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmeAuditTrail runs the README's audit trail example against a
// real server (the built binary on PATH) after one run: list, export,
// pin the key with server audit-key, verify against the server and the
// export, as written.
func TestReadmeAuditTrail(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Audit trail\n")
	if !ok {
		t.Fatal("README has no '### Audit trail' section")
	}
	script := fenced(t, section, "sh")
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	testsupport.RepoAt(t, repo, map[string]string{"a.go": "package a\n"})
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testsupport.Agentrun(t), filepath.Join(bin, "agentrun")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + root, "LANG=C", "AGENTRUN_HOME=" + filepath.Join(root, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(root, "config")}
	// The server's data directory is the default one, which server
	// audit-key reads as the example runs it.
	url := startServer(t, env, "--allow-host-sandbox", "--audit-every", "5")
	env = append(env, "AGENTRUN_SERVER="+url)
	out := sh(t, repo, env, `agentrun submit --sandbox host --agent-cmd "echo x >> a.go" --wait "change a"`)
	id := regexp.MustCompile(`run ([0-9a-z]{10}) succeeded`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("the submit said:\n%s", out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		if strings.HasPrefix(l, "agentrun ") {
			lines = append(lines, strings.ReplaceAll(l, "sem3x37949", id[1]))
		}
	}
	out = sh(t, root, env, strings.Join(lines, "\n"))
	for _, want := range []string{"run.state", "submit", id[1], "ok  " + url + ": ", "ok  trail-2026-12-01.jsonl: ", "verified with sha256:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the example's output lacks %q:\n%s", want, out)
		}
	}
}
