package testsupport

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// helperGateEnv names the file helper processes wait for (AwaitGate), so
// that RunHelpers releases them together.
const helperGateEnv = "AGENTRUN_TEST_HELPER_GATE"

// SearchableDir makes a new directory in parent ("": the temporary
// directory) named prefix and a random suffix, that any user can search
// (0755: a test may run a process as another user), and removes it at
// the test's end.
func SearchableDir(tb testing.TB, parent, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// RunHelpers re-executes the test binary as procs helper processes running
// only the test named test, each with env added to the environment (and
// cred, if set, applied to its command). They are released together once
// all have started (AwaitGate). It returns their combined stdout once all
// have exited; a helper that failed fails t, with its stderr logged.
func RunHelpers(t testing.TB, test string, procs int, env []string, cred func(*exec.Cmd)) string {
	t.Helper()
	// A directory any user can search: cred may run a helper as another.
	dir := SearchableDir(t, "", "agentrun-helpers-")
	gate := filepath.Join(dir, "go")
	var out bytes.Buffer
	var mu sync.Mutex
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), env...), helperGateEnv+"="+gate)
		cmd.Stdout = lockedWriter{mu: &mu, w: &out}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if cred != nil {
			cred(cmd)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() && stderr.Len() > 0 {
				t.Logf("helper %d stderr: %s", i, stderr.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v", i, err)
		}
	}
	return out.String()
}

// AwaitGate, in a helper process RunHelpers started, waits until all the
// helpers are released (at once if it was not started by RunHelpers).
func AwaitGate() {
	gate := os.Getenv(helperGateEnv)
	if gate == "" {
		return
	}
	for {
		if _, err := os.Stat(gate); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// lockedWriter serialises the goroutines that copy each helper's stdout.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
