package docs

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadmeRealProject runs the README's "checks that need dependencies"
// example on a Go module with one dependency, with a command standing in
// for the agent CLI (the rest of the command line as written): without
// --allow the build check fails and result names the preset; with
// --allow preset:goproxy the module is fetched through the egress proxy
// and both checks pass. It needs the Go module proxy, as CI has.
func TestReadmeRealProject(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### A real project: checks that need dependencies\n")
	if !ok {
		t.Fatal("README has no 'A real project' section")
	}
	block := fenced(t, section, "sh")
	const agent = "--agent claude --model claude-sonnet-4-5"
	if !strings.Contains(block, agent) || !strings.Contains(block, "--allow preset:goproxy") {
		t.Fatalf("the example changed:\n%s", block)
	}
	for _, tool := range []string{"go", "git", "bash"} {
		testsupport.Program(t, tool)
	}
	bin := testsupport.Agentrun(t)
	root := t.TempDir()
	repo, home := filepath.Join(root, "repo"), filepath.Join(root, "home")
	for _, d := range []string{repo, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	env := []string{
		"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"GOPATH=" + strings.TrimSpace(string(gopath)), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	}
	shell := func(script string) (string, error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	setup := `printf 'module demo\n\ngo 1.21\n' > go.mod &&
printf 'package main\n\nimport "github.com/google/uuid"\n\nfunc main() { println(uuid.NewString()) }\n' > main.go &&
go get github.com/google/uuid@v1.6.0 >/dev/null 2>&1`
	if out, err := shell(setup); err != nil {
		t.Fatalf("setup (the Go module proxy must be reachable): %v\n%s", err, out)
	}
	testsupport.RepoAt(t, repo, nil)
	if out, err := shell(bin + ` submit --json --agent-cmd true --wait probe`); err != nil && strings.Contains(out, "sandbox_preflight") {
		if testsupport.Required() {
			t.Fatalf("requires the native sandbox: %s", out)
		}
		env = append(env, "AGENTRUN_SANDBOX=host")
	}
	// The sandbox's own module cache starts empty (its HOME), so the
	// build must fetch the dependency.
	cmdline := strings.ReplaceAll(block, agent, `--agent-cmd 'echo "// fixed" >> main.go'`)
	offline := strings.ReplaceAll(cmdline, "--allow preset:goproxy", "--attempts 1")
	out, err := shell(offline)
	if err == nil || !strings.Contains(out, "failed") {
		t.Fatalf("without --allow the build check should fail:\n%s", out)
	}
	res, _ := shell(bin + ` result $(` + bin + ` list -q --limit 1)`)
	if !strings.Contains(res, "preset:goproxy") {
		t.Fatalf("result does not point at the preset:\n%s", res)
	}
	// Where the module proxy resolves to an address the egress proxy
	// treats as special (a registry mirror on a documentation or private
	// range, as on some CI machines), the preset's names alone are denied
	// by design; an IP entry naming that address is the documented way in.
	for _, host := range []string{"proxy.golang.org", "storage.googleapis.com", "sum.golang.org"} {
		addrs, _ := net.LookupHost(host)
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a); err == nil && (ip.IsPrivate() || !ip.IsGlobalUnicast() || netip.MustParsePrefix("203.0.113.0/24").Contains(ip) ||
				netip.MustParsePrefix("198.51.100.0/24").Contains(ip) || netip.MustParsePrefix("192.0.2.0/24").Contains(ip)) {
				cmdline = strings.Replace(cmdline, "--allow preset:goproxy", "--allow preset:goproxy --allow "+net.JoinHostPort(a, "443"), 1)
			}
		}
	}
	out, err = shell(cmdline)
	if err != nil || !strings.Contains(out, "succeeded") {
		t.Fatalf("the README's example failed: %v\n--- script\n%s\n--- output\n%s", err, cmdline, out)
	}
}
