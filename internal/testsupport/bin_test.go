package testsupport

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSweepTestBins: the binaries of ended test processes go; those of
// live ones, and recent ones from before the naming by process, stay.
func TestSweepTestBins(t *testing.T) {
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
		mk(testBinPrefix+strconv.Itoa(dead.Process.Pid)+"-123", 0),
		mk(testBinPrefix+"987654", 25*time.Hour),
	}
	kept := []string{
		mk(testBinPrefix+strconv.Itoa(os.Getpid())+"-456", 48*time.Hour),
		mk(testBinPrefix+"1234567", time.Hour),
	}
	sweepTestBins()
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
