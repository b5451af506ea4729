package pidtemp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The directories of ended processes go; those of live ones, and recent
// ones from before the naming by process, stay; MkdirTemp sweeps first.
func TestSweep(t *testing.T) {
	const prefix = "agentrun-test-"
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, age time.Duration) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(d, at, at); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone := []string{
		mk(prefix+strconv.Itoa(dead.Process.Pid)+"-123", 0),
		mk(prefix+"987654", 25*time.Hour),
	}
	kept := []string{
		mk(prefix+strconv.Itoa(os.Getpid())+"-456", 48*time.Hour),
		mk(prefix+"1234567", time.Hour),
	}
	d, err := MkdirTemp(prefix)
	if err != nil || !strings.HasPrefix(filepath.Base(d), prefix+strconv.Itoa(os.Getpid())+"-") {
		t.Fatalf("%s %v", d, err)
	}
	kept = append(kept, d)
	for _, d := range gone {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", d, err)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
