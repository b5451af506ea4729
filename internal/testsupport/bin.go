package testsupport

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/pidtemp"
)

var agentrunBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// Agentrun returns the path of a freshly built agentrun binary, for tests
// that need the real executable (supervisor, runner, sandbox init). It is
// built with CGO_ENABLED=0, so it runs in any sandbox without a libc. The
// build is shared by every test in the process, in a directory named
// after the process; each build removes those of processes that have
// ended (a binary is about 50 MB, and a day of test runs left hundreds).
// If AGENTRUN_TEST_BIN is set, that prebuilt binary is used instead (for
// test binaries run by a user without a writable Go build cache).
func Agentrun(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENTRUN_TEST_BIN"); p != "" {
		return p
	}
	b := &agentrunBuild
	b.once.Do(func() {
		var dir string
		dir, b.err = pidtemp.MkdirTemp(testBinPrefix)
		if b.err != nil {
			return
		}
		b.path = filepath.Join(dir, "agentrun")
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/agentrun")
		cmd.Dir = moduleRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build agentrun: %v\n%s", b.err, b.out)
	}
	return b.path
}

const testBinPrefix = "agentrun-testbin-"

// moduleRoot is two levels up from this file (internal/testsupport).
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
