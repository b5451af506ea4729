package native_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestInitSkipsOtherPackagesInits: the init runs from the native
// package's init, so pid 1 never initializes the packages that come after
// it (the CLI's, main's). Without its config descriptor it fails at once,
// after the runtime has said which packages it initialized.
func TestInitSkipsOtherPackagesInits(t *testing.T) {
	cmd := exec.Command(testsupport.Agentrun(t), "__sandbox", "init")
	cmd.Env = []string{"GOMAXPROCS=1", "GODEBUG=inittrace=1"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 70 {
		t.Fatalf("init without a config: %v, want exit 70\n%s", err, out)
	}
	trace := string(out)
	// The runtime reports a package once its init is done: native's never
	// is, the runner's (one of its imports) is.
	for _, want := range []string{"init github.com/agentrun/agentrun/internal/sandbox/native/execpriv @", "init github.com/agentrun/agentrun/internal/runner @"} {
		if !strings.Contains(trace, want) {
			t.Errorf("no %q in the init's trace:\n%s", want, trace)
		}
	}
	for _, skipped := range []string{"init github.com/agentrun/agentrun/internal/cli @", "init main @"} {
		if strings.Contains(trace, skipped) {
			t.Errorf("the init initialized what it never uses (%q):\n%s", skipped, trace)
		}
	}
}
