package native_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyTheForkThreadLosesItsBoundingSet: as root, the host's thread
// that forks the inits empties its bounding set (so that theirs starts
// empty); every other thread of the host keeps the one it had.
func TestOnlyTheForkThreadLosesItsBoundingSet(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("as root only: with userns the init's bounding set starts full whatever the host's is")
	}
	before := capBnd(t, "/proc/self/status")
	if before == "0000000000000000" {
		t.Skip("this process has no bounding set to lose")
	}
	b := requireNative(t)
	start(t, b, newSpec(t))
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	emptied := 0
	for _, f := range tasks {
		switch got := capBnd(t, f); got {
		case before:
		case "0000000000000000":
			emptied++
		default:
			t.Errorf("%s: bounding set %s, want %s (or empty on the fork thread)", f, got, before)
		}
	}
	if emptied != 1 {
		t.Errorf("%d of %d threads have an empty bounding set, want the fork thread alone", emptied, len(tasks))
	}
}

func capBnd(t *testing.T, status string) string {
	t.Helper()
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no CapBnd in %s", status)
	return ""
}
