package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestDoctorCLIHidden: a CLI installed where the default sandbox mounts
// its own (the native sandbox's /dev) is found, but doctor warns, as
// submit would refuse it (agent_not_visible); one under /tmp is shown on
// the sandbox's own /tmp, and is fine.
func TestDoctorCLIHidden(t *testing.T) {
	h := newTestHome(t)
	h.executable = testsupport.Agentrun(t)
	inDev := testsupport.SearchableDir(t, "/dev/shm", "agentrun-cli-")
	inTmp := testsupport.SearchableDir(t, "/tmp", "agentrun-cli-")
	for dir, name := range map[string]string{inDev: "claude", inTmp: "codex"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho 2.1.337\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.env["PATH"] = inDev + ":" + inTmp + ":" + os.Getenv("PATH")
	h.env["AGENTRUN_SANDBOX"] = "native"
	_, js, _, got := doctorJSON(t, h)
	if c := got["agent.claude"]; c.Status != "warn" || !strings.Contains(c.Detail, "the native sandbox cannot show it") ||
		!strings.Contains(c.Detail, filepath.Join(inDev, "claude")) ||
		c.Fix != catalog.AgentHidden.Fix {
		t.Errorf("agent.claude: %+v\n%s", c, js)
	}
	if c := got["agent.codex"]; c.Path != filepath.Join(inTmp, "codex") || strings.Contains(c.Detail, "cannot show") {
		t.Errorf("agent.codex: %+v", c)
	}
}
