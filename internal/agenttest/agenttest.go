// Package agenttest finds the real agent CLIs that tests run. CI installs
// each at a pinned version under its own prefix outside /usr
// (.ci/install-agents.sh: $AGENTRUN_TEST_CLIS/<profile>/bin/<binary>, default
// /opt/agentrun-ci), so the tests also prove that a CLI installed anywhere
// is made visible inside the sandbox.
package agenttest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// Root is where the test CLIs are installed.
func Root() string {
	if d := os.Getenv("AGENTRUN_TEST_CLIS"); d != "" {
		return d
	}
	return "/opt/agentrun-ci"
}

// BinDir is the bin directory of profile's CLI.
func BinDir(profile string) string { return filepath.Join(Root(), profile, "bin") }

// CLI returns the path of profile's CLI binary. It skips the test when the
// CLI is not installed, or fails it where AGENTRUN_REQUIRE_CAPS=1 (CI).
func CLI(t testing.TB, profile, binary string) string {
	t.Helper()
	p := filepath.Join(BinDir(profile), binary)
	_, err := os.Stat(p)
	testsupport.Require(t, "the "+profile+" CLI", err == nil, "not installed at %s (.ci/install-agents.sh installs it)", p)
	return p
}
