package pidtemp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A zombie's directory goes: the process was killed (kill -9) and its
// parent has not reaped it yet, as a container's init may be slow to.
func TestSweepZombie(t *testing.T) {
	const prefix = "agentrun-test-"
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	d := filepath.Join(tmp, prefix+strconv.Itoa(pid)+"-1")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	Sweep(prefix)
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("a live process's directory: %v", err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !zombie(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed child never became a zombie")
		}
	}
	Sweep(prefix)
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Fatalf("a zombie's directory stayed: %v", err)
	}
	child.Wait()
}
