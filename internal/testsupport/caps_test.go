package testsupport_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// Not parallel: it sets the environment. A missing capability skips where
// capabilities are not required (the failing side cannot be shown from
// inside the test that would fail).
func TestRequireSkips(t *testing.T) {
	t.Setenv("AGENTRUN_REQUIRE_CAPS", "")
	var skipped, ranOn bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		testsupport.Require(t, "a thing", false, "not here: %d", 1)
		ranOn = true
	})
	if !skipped || ranOn {
		t.Fatalf("skipped %v, ran on %v", skipped, ranOn)
	}
	t.Run("present", func(t *testing.T) {
		testsupport.Require(t, "a thing", true, "never said")
		if t.Skipped() {
			t.Fatal("skipped with the capability present")
		}
	})
	if p := testsupport.Program(t, "sh"); p == "" {
		t.Fatal("no path for sh")
	}
}
