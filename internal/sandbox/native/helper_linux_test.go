package native_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/testsupport"
)

type helper struct {
	cmd    *exec.Cmd
	stdout io.Reader
}

// execHelper re-runs this test binary as a supervisor that starts a
// sandbox with a background process in it, says "ready" and waits.
func execHelper(t *testing.T, spec sandbox.Spec) *helper {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSupervisor$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NATIVE_HELPER_SUPERVISOR=1", "NATIVE_HELPER_SPEC="+string(b), "AGENTRUN_TEST_BIN="+testsupport.Agentrun(t))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &helper{cmd: cmd, stdout: out}
}

func TestHelperSupervisor(t *testing.T) {
	if os.Getenv("NATIVE_HELPER_SUPERVISOR") != "1" {
		t.Skip("helper role only")
	}
	var spec sandbox.Spec
	if err := json.Unmarshal([]byte(os.Getenv("NATIVE_HELPER_SPEC")), &spec); err != nil {
		t.Fatal(err)
	}
	b := backend(t)
	sb, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: detachScript}, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %v", err, res)
	}
	fmt.Println("ready")
	select {}
}

// detachScript starts a sleep in its own session (out of the exec's
// process group, so only the sandbox's end can kill it) and waits until
// it is there.
const detachScript = `setsid sleep 1000 >/dev/null 2>&1 & p=$!
while [ "$(cut -d' ' -f6 /proc/$p/stat)" != "$p" ]; do sleep 0.01; done;`
