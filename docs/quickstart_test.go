package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// exampleID is the run id the README's quick start shows.
const exampleID = "sem3x37949"

// TestReadmeQuickStart runs the README's quick start as written, with the
// real binary on PATH in a fresh HOME: the example id in the commands is
// replaced by the id the real submit printed. It uses the host sandbox
// (AGENTRUN_SANDBOX=host, the environment setting the README documents) so
// it runs wherever the test runs; the native backend has its own tests.
func TestReadmeQuickStart(t *testing.T) {
	for _, tool := range []string{"git", "bash"} {
		testsupport.Program(t, tool)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := quickStart(t, string(readme))
	i := strings.Index(block, "\n# run "+exampleID)
	if i < 0 {
		t.Fatalf("the quick start no longer shows '# run %s' after its submit", exampleID)
	}
	setup, rest := block[:i], block[i:]

	bin := testsupport.Agentrun(t)
	root := t.TempDir()
	env := []string{
		"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + filepath.Join(root, "home"),
		"AGENTRUN_SANDBOX=host",
		"LANG=C.UTF-8",
	}
	if err := os.Mkdir(filepath.Join(root, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	shell := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n--- script\n%s\n--- output\n%s", err, script, out)
		}
		return string(out)
	}
	out := shell(setup)
	m := regexp.MustCompile(`run ([0-9a-z]{10}) succeeded`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("submit did not print 'run ID succeeded':\n%s", out)
	}
	id := m[1]
	rest = strings.ReplaceAll(rest, exampleID, id)
	rest = strings.ReplaceAll(rest, exampleID[:4], id[:4])
	// demo is where the setup left the shell; the second script starts anew.
	out = shell("cd demo\n" + rest)
	for _, want := range []string{id, "accepted: merged", "removed", "branch agentrun/" + id + " deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("quick start output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "demo", "hello.txt")); err != nil {
		t.Errorf("the merged result is not in the repository: %v", err)
	}
}

// quickStart returns the first sh block under "## Quick start".
func quickStart(t *testing.T, readme string) string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Quick start\n")
	if !ok {
		t.Fatal("README has no '## Quick start' section")
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("the quick start has no sh block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatal("the quick start's sh block is not closed")
	}
	return block
}
