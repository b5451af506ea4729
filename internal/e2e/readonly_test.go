package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestReadOnlyUnderTmp: a host directory under /tmp, named with --ro or
// holding the agent command's program, is shown read-only on the native
// sandbox's own /tmp: the program runs, the file reads, and the agent's
// change of it is refused while the run goes on.
func TestReadOnlyUnderTmp(t *testing.T) {
	e := newEnv(t)
	tools := testsupport.SearchableDir(t, "/tmp", "agentrun-tools-")
	data := testsupport.SearchableDir(t, "/tmp", "agentrun-data-")
	if err := os.WriteFile(filepath.Join(tools, "fixer"), []byte("#!/bin/sh\ncat \"$1\"/input.txt > fixed.txt\n(echo changed > \"$1\"/input.txt) 2>/dev/null && echo changed >> fixed.txt\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "input.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, res := e.submitJSON([]string{"PATH=" + tools + ":" + os.Getenv("PATH")}, "--sandbox", "native", "--agent-cmd", "fixer "+data,
		"--ro", data, "--wait", "fix")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	must(t, res, 0)
	if got, _ := resultFile(e, d.Commit, "fixed.txt"); strings.TrimSpace(got) != "from the host" {
		t.Fatalf("fixed.txt %q", got)
	}
	if got, err := os.ReadFile(filepath.Join(data, "input.txt")); err != nil || string(got) != "from the host\n" {
		t.Fatalf("the host's file is now %q (%v)", got, err)
	}
}

// TestReadOnlyRefusedAtSubmit: a read-only path the native sandbox
// cannot show at its own path (its /etc, /tmp itself; a CLI installed
// under its /dev) is refused at submit with a catalog error, nothing
// made, instead of failing the run as its sandbox starts.
func TestReadOnlyRefusedAtSubmit(t *testing.T) {
	e := newEnv(t)
	cli := testsupport.SearchableDir(t, "/dev/shm", "agentrun-cli-")
	if err := os.WriteFile(filepath.Join(cli, "claude"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inDev := []string{"PATH=" + cli + ":" + os.Getenv("PATH"), "ANTHROPIC_API_KEY=sk-x"}
	cases := []struct {
		name string
		env  []string
		args []string
		code string
		says string
	}{
		{"--ro on the sandbox's /etc", nil, []string{"--agent-cmd", "true", "--ro", "/etc/hosts"}, "bad_path", "/etc"},
		{"--ro of /tmp itself", nil, []string{"--agent-cmd", "true", "--ro", "/tmp"}, "bad_path", "/tmp"},
		{"a CLI under the sandbox's /dev", inDev, []string{"--agent", "claude"}, "agent_not_visible", cli},
		{"a command's program under the sandbox's /dev", nil, []string{"--agent-cmd", filepath.Join(cli, "claude")}, "agent_not_visible", cli},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.agentrun(c.env, append([]string{"submit", "--json", "--sandbox", "native"}, append(c.args, "t")...)...)
			if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
				requireCaps(t, "the native sandbox", false, res.stdout)
			}
			must(t, res, 2)
			var doc struct {
				Error struct{ Code, Error, Cause, Fix string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || doc.Error.Code != c.code || doc.Error.Fix == "" ||
				!strings.Contains(doc.Error.Cause, c.says) {
				t.Fatalf("want %s naming %s, got %s (%v)", c.code, c.says, res.stdout, err)
			}
			if ids := e.runIDs(); len(ids) != 0 {
				t.Fatalf("runs were created: %v", ids)
			}
		})
	}
}
