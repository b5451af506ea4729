package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Required reports whether missing capabilities are failures here.
func Required() bool { return os.Getenv("AGENTRUN_REQUIRE_CAPS") == "1" }

// Require skips (or, where capabilities are required, fails) the test
// unless ok; what names the capability, why the reason it is missing.
func Require(t testing.TB, what string, ok bool, why string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	if len(args) > 0 {
		why = fmt.Sprintf(why, args...)
	}
	if Required() {
		t.Fatalf("requires %s: %s (AGENTRUN_REQUIRE_CAPS=1)", what, why)
	}
	t.Skipf("requires %s: %s", what, why)
}

// Program requires a program on PATH and returns its path.
func Program(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Require(t, name, err == nil, "%v", err)
	return p
}
