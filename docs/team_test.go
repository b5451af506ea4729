package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmeTeamMode runs the README's Team mode example against a real
// server (the built binary, on a free port, with the host sandbox as the
// operator's default): the curl commands as written, with the spec's
// agent replaced by a command (no agent CLI is installed here), then
// checks that the fetched branch carries the change.
func TestReadmeTeamMode(t *testing.T) {
	testsupport.Program(t, "curl")
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Team mode (preview)\n")
	if !ok {
		t.Fatal("README has no '## Team mode (preview)' section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	start := fenced(t, section, "sh")
	if !strings.Contains(start, "agentrun server --listen 127.0.0.1:8080") {
		t.Fatalf("the first block does not start a server:\n%s", start)
	}
	_, rest, _ := strings.Cut(section, "Submit a run with curl")
	script := fenced(t, rest, "sh")

	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	testsupport.RepoAt(t, repo, map[string]string{"auth.go": "package auth\n"})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "LANG=C", "AGENTRUN_HOME=" + filepath.Join(root, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(root, "config"), "AGENTRUN_SANDBOX=host"}
	url := startServer(t, env)

	// The spec's agent is a command here; the rest is as written.
	spec := regexp.MustCompile(`(?s)<<'EOF'\n.*?\nEOF\n`)
	if !spec.MatchString(script) {
		t.Fatalf("no spec in the example:\n%s", script)
	}
	script = spec.ReplaceAllString(script, "<<'EOF'\n{\"task\": \"Fix the flaky auth tests\", \"agent_cmd\": \"echo '// fixed' >> auth.go\",\n"+
		" \"checks\": [{\"name\": \"test\", \"command\": \"grep -q fixed auth.go\"}]}\nEOF\n")
	script = strings.ReplaceAll(script, "http://127.0.0.1:8080", url)
	script = strings.ReplaceAll(script, "/tmp/", root+"/")
	submit, follow, ok := strings.Cut(script, "\n  → ")
	if !ok {
		t.Fatalf("the example shows no answer to the submit:\n%s", script)
	}
	_, follow, _ = strings.Cut(follow, "\n")
	out := sh(t, repo, env, submit)
	id := regexp.MustCompile(`"id":"([0-9a-z]{10})"`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("the submit answered %s", out)
	}
	out = sh(t, repo, env, strings.ReplaceAll(follow, "sem3x37949", id[1]))
	if !strings.Contains(out, `"type":"state","status":"succeeded"`) || !strings.Contains(out, `+// fixed`) {
		t.Errorf("the stream and the diff:\n%s", out)
	}
	if got := testsupport.Git(t, repo, "show", "agentrun/"+id[1]+":auth.go"); got != "package auth\n// fixed" {
		t.Errorf("auth.go on the fetched branch: %q", got)
	}
}

// startServer starts the built binary as a server on a free loopback
// port with env (and args) and returns its URL; it is killed when the
// test ends.
func startServer(t *testing.T, env []string, args ...string) string {
	t.Helper()
	srv := exec.Command(testsupport.Agentrun(t), append([]string{"server", "--listen", "127.0.0.1:0"}, args...)...)
	srv.Env = env
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "agentrun server: serving "); ok {
				a, _, _ = strings.Cut(a, " ")
				addr <- strings.TrimSuffix(a, "/")
			}
		}
	}()
	select {
	case url := <-addr:
		return url
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not start")
	}
	return ""
}

// TestReadmeTeamModeCLI runs the README's "From the CLI" example against
// a real server with a token (the built binary on PATH): the commands as
// written, with the agent replaced by a command and the host sandbox
// named; the branch must come back into the repository.
func TestReadmeTeamModeCLI(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### From the CLI\n")
	if !ok {
		t.Fatal("README has no '### From the CLI' section")
	}
	script := fenced(t, section, "sh")
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	testsupport.RepoAt(t, repo, map[string]string{"auth.go": "package auth\n"})
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testsupport.Agentrun(t), filepath.Join(bin, "agentrun")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + root, "LANG=C", "AGENTRUN_HOME=" + filepath.Join(root, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(root, "config")}
	token := filepath.Join(root, ".config", "agentrun", "team-token")
	if !strings.Contains(script, "~/.config/agentrun/team-token") {
		t.Fatalf("the example names no token file:\n%s", script)
	}
	if err := os.MkdirAll(filepath.Dir(token), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("team-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startServer(t, env, "--data", filepath.Join(root, "server"), "--token-file", token, "--allow-host-sandbox")

	var prefix, submit, rest []string
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		switch {
		case strings.HasPrefix(l, "  → "):
		case strings.HasPrefix(l, "export "):
			prefix = append(prefix, strings.ReplaceAll(l, "http://127.0.0.1:8080", url))
		case strings.HasPrefix(l, "agentrun submit "):
			if !strings.Contains(l, "--agent claude --check 'test=go test ./...'") {
				t.Fatalf("the submit line changed: %s", l)
			}
			submit = append(submit, strings.Replace(l, "--agent claude --check 'test=go test ./...'",
				`--sandbox host --agent-cmd "echo '// fixed' >> auth.go" --check 'test=grep -q fixed auth.go'`, 1))
		default:
			rest = append(rest, l)
		}
	}
	pre := strings.Join(prefix, "\n") + "\n"
	out := sh(t, repo, env, pre+strings.Join(submit, "\n"))
	id := regexp.MustCompile(`run ([0-9a-z]{10}) succeeded`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("the submit said:\n%s", out)
	}
	out = sh(t, repo, env, pre+strings.ReplaceAll(strings.Join(rest, "\n"), "sem3x37949", id[1]))
	if !strings.Contains(out, "auth.go | 1 +") || !strings.Contains(out, "run "+id[1]+" accepted") {
		t.Errorf("the example said:\n%s", out)
	}
	if got := testsupport.Git(t, repo, "show", "agentrun/"+id[1]+":auth.go"); got != "package auth\n// fixed" {
		t.Errorf("auth.go on the branch: %q", got)
	}
}

// sh runs script in dir and returns its output, failing on an error.
func sh(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-e", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\n---\n%s", err, script, out)
	}
	return string(out)
}
