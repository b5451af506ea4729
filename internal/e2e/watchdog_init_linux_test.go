package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestWatchdogSkipsTheBinarysInits: the agentrun binary started as the
// runner's watchdog runs it from package deathwatch's init, before the
// inits of the packages it does not use (the runner's own, the CLI's, the
// Docker client's, the metrics'), which would take CPU from the command
// it watches while that command starts. It ends at once, as it should,
// when its pipe is already closed.
func TestWatchdogSkipsTheBinarysInits(t *testing.T) {
	bin := testsupport.Agentrun(t)
	cmd := exec.Command(bin)
	cmd.Args = []string{deathwatch.Arg0}
	cmd.Env = []string{deathwatch.Env + "=1", "GODEBUG=inittrace=1"}
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = strings.NewReader(""), &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the watchdog with nothing to watch: %v\n%s", err, stderr.String())
	}
	n := 0
	for line := range strings.Lines(stderr.String()) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		n++
		switch pkg := f[1]; pkg {
		case "github.com/agentrun/agentrun/internal/runner", "github.com/agentrun/agentrun/internal/cli",
			"github.com/agentrun/agentrun/internal/server", "github.com/agentrun/agentrun/internal/sandbox/docker",
			"github.com/distribution/reference", "github.com/prometheus/client_golang/prometheus":
			t.Errorf("the watchdog initialized %s", pkg)
		}
	}
	if n == 0 {
		t.Fatalf("no init trace: %s", stderr.String())
	}
	t.Logf("%d inits before the watchdog ran", n)
}
