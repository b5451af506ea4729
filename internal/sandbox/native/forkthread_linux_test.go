package native_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyTheForkThreadLosesItsBoundingSet: as root, the host's thread
// that forks the inits empties its bounding set (so that theirs starts
// empty); every other thread of the host keeps the one it had. As a user
// (userns: the init's bounding set starts full whatever the host's is)
// no thread of the host changes.
func TestOnlyTheForkThreadLosesItsBoundingSet(t *testing.T) {
	want := 0
	if os.Getuid() == 0 {
		want = 1
	}
	before := capBnd(t, "/proc/self/status")
	if before == "0000000000000000" {
		t.Fatal("this process has no bounding set to lose: the test cannot tell")
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
	if emptied != want {
		t.Errorf("%d of %d threads have an empty bounding set, want %d (the fork thread as root, none as a user)", emptied, len(tasks), want)
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
