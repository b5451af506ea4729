package native_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// requireCap skips (or, with AGENTRUN_REQUIRE_CAPS=1, fails) a test that
// needs a capability this machine lacks.
func requireCap(t testing.TB, name, why string) {
	t.Helper()
	testsupport.Require(t, name, false, "%s", why)
}

var (
	preflightOnce sync.Once
	preflightErr  error
)

// requireNative skips unless the native sandbox can run here: user
// namespaces when not root, seccomp, mounts.
func requireNative(t testing.TB) *native.Backend {
	t.Helper()
	b := backend(t)
	preflightOnce.Do(func() { preflightErr = b.Preflight(context.Background()) })
	if preflightErr != nil {
		requireCap(t, "native sandbox", preflightErr.Error())
	}
	return b
}

func backend(t testing.TB) *native.Backend {
	t.Helper()
	var ro []string
	if _, err := os.Stat("/usr/local/go"); err == nil {
		ro = append(ro, "/usr/local/go")
	}
	return native.New(native.Options{Executable: testsupport.Agentrun(t), ReadOnlyPaths: ro}).(*native.Backend)
}

// newSpec makes an empty workspace, a home and a state dir under a fresh
// temp dir.
func newSpec(t testing.TB) sandbox.Spec {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	home := filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return sandbox.Spec{
		RunID:     "test",
		Workspace: ws,
		Home:      home,
		StateDir:  filepath.Join(dir, "state"),
		Env:       []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C"},
		Network:   sandbox.NetworkNone,
	}
}

type result struct {
	code           int
	stdout, stderr string
	enforced       map[string]string
}

// sh runs a shell script in a fresh sandbox made from spec.
func sh(t testing.TB, b *native.Backend, spec sandbox.Spec, script string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code, enf, err := b.Command(ctx, spec, []string{"/bin/sh", "-c", script}, nil, &out, &errb)
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String(), enforced: enf}
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout: " + strings.TrimSpace(r.stdout) + "\nstderr: " + strings.TrimSpace(r.stderr)
}
