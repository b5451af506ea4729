package native

import (
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox/native/execpriv"
)

// TestProbeErrorNamesTheCgoBuild: an init that cannot confine its threads
// because the binary uses cgo is a preflight error whose fix is the build,
// not the kernel; another confinement failure still points at the kernel.
func TestProbeErrorNamesTheCgoBuild(t *testing.T) {
	for _, c := range []struct {
		msg, fix string
	}{
		{"clear ambient capabilities on every thread: " + execpriv.CgoRefusal + ": operation not supported", "CGO_ENABLED=0"},
		{"seccomp: invalid argument", "kernel's seccomp support"},
	} {
		err := probeError(&setupError{Step: "confine", Msg: c.msg})
		ce, ok := catalog.As(err)
		if !ok || ce.Code != catalog.SandboxPreflight.Code || !strings.Contains(ce.Fix, c.fix) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v (fix %q), want sandbox_preflight with a fix naming %q", c.msg, err, ce.Fix, c.fix)
		}
	}
}
