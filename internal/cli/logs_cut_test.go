package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
)

// A check that writes 40 MiB ending with a marker, run by a real runner
// into the check's log as the supervisor does: logs prints a log that ends
// with the marker and holds the cut note, and says on stderr that the
// middle was cut.
func TestLogsSaysOutputWasCut(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	dir, err := os.MkdirTemp("", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- runner.Serve(ctx, ln, runner.ServerOptions{Root: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}})
	}()
	defer func() { cancel(); <-served }()
	cl, err := runner.Dial(context.Background(), filepath.Join(dir, "s"), runner.DialOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	logf, err := os.OpenFile(h.st.L.CheckLog(r.ID, 1, "unit"), os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	const total = 40 << 20
	shell := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo CHECK-FAILED-BECAUSE", total-len("CHECK-FAILED-BECAUSE\n"))
	_, err = cl.Exec(context.Background(), runner.ExecRequest{Shell: shell}, logf, logf)
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := h.exec("logs", r.ID, "--check", "unit", "--attempt", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	cut := total - runner.DefaultOutputCap
	if !strings.HasSuffix(out, "CHECK-FAILED-BECAUSE\n") {
		t.Errorf("the log does not end with the marker: %q", out[max(len(out)-40, 0):])
	}
	if !strings.Contains(out, fmt.Sprintf("\n... %d bytes cut ...\n", cut)) {
		t.Error("no cut note in the log")
	}
	if !strings.Contains(errOut, fmt.Sprintf("%d bytes in its middle are not in the log", cut)) {
		t.Errorf("stderr does not say the output was cut: %q", errOut)
	}
}
