package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmeOwnModel runs the README's "on your own model" section as
// written: its submit command and its config.toml, with the real qwen CLI
// (installed by .ci/install-agents.sh) and the scripted model server
// standing in for LM Studio (its URL replaces http://localhost:1234), in
// the native sandbox where it can run.
func TestReadmeOwnModel(t *testing.T) {
	qwen := agenttest.CLI(t, "qwen", "qwen")
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Run Claude Code / Codex")
	if !ok {
		t.Fatal("README has no 'Run Claude Code / Codex ... on your own model' section")
	}
	cmdBlock := fenced(t, section, "sh")
	tomlBlock := fenced(t, section, "toml")
	srv := modelserver.New(t, "", "qwen3-coder-30b", modelserver.WriteFileIn("/workspace", "hello.txt", "hello\n"))
	// LM Studio takes no key: the scripted server accepts requests without.
	cmdBlock = strings.ReplaceAll(cmdBlock, "http://localhost:1234", srv.URL)
	tomlBlock = strings.ReplaceAll(tomlBlock, "http://localhost:1234", srv.URL)
	var lines []string
	for _, l := range strings.Split(cmdBlock, "\n") {
		if strings.HasPrefix(l, "npm install") {
			continue // installed by CI under agenttest.Root()
		}
		lines = append(lines, l)
	}
	cmdBlock = strings.Join(lines, "\n")

	bin := testsupport.Agentrun(t)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	repo := filepath.Join(root, "repo")
	for _, d := range []string{home, repo} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"PATH=" + filepath.Dir(bin) + ":" + filepath.Dir(qwen) + ":" + os.Getenv("PATH"),
		"HOME=" + home, "LANG=C.UTF-8",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	}
	shell := func(script string) (string, error) {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// A Go module the README's check builds.
	testsupport.RepoAt(t, repo, map[string]string{"go.mod": "module demo\n\ngo 1.21\n", "main.go": "package main\n\nfunc main() {}\n"})
	if out, err := shell(bin + ` submit --json --agent-cmd true --wait probe`); err != nil && strings.Contains(out, "sandbox_preflight") {
		if testsupport.Required() {
			t.Fatalf("requires the native sandbox: %s", out)
		}
		env = append(env, "AGENTRUN_SANDBOX=host")
	}
	out, err := shell(cmdBlock)
	if err != nil || !strings.Contains(out, "succeeded") {
		t.Fatalf("the README's command failed: %v\n--- script\n%s\n--- output\n%s", err, cmdBlock, out)
	}
	if len(srv.ModelRequests(modelserver.Chat)) == 0 {
		t.Fatal("no chat completion reached the model server")
	}
	// The same through config.toml's model_server.
	cfg := filepath.Join(home, ".config", "agentrun")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.toml"), []byte(tomlBlock), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = shell(bin + ` submit --wait --agent qwen --model qwen3-coder-30b "Write hello.txt"`)
	if err != nil || !strings.Contains(out, "succeeded") {
		t.Fatalf("with the README's config.toml: %v\n%s", err, out)
	}
	out, _ = shell(bin + ` status $(` + bin + ` list --json | sed -n 's/.*"id": "\([0-9a-z]*\)".*/\1/p' | head -1)`)
	if !strings.Contains(out, "lmstudio") || !strings.Contains(out, "4 at once") {
		t.Fatalf("status does not show the configured model server:\n%s", out)
	}
}

// fenced returns the first ```lang block of s.
func fenced(t *testing.T, s, lang string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, "```"+lang+"\n")
	if !ok {
		t.Fatalf("no %s block", lang)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("the %s block is not closed", lang)
	}
	return block
}
