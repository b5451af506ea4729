package sandboxtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
)

// Options configure Run.
type Options struct {
	// Spec, if set, adjusts the spec of the tested backend's sandbox before
	// Start (network mode, read-only paths, limits).
	Spec func(*sandbox.Spec)
	// Reference is the backend every outcome is compared with (default:
	// the host backend).
	Reference sandbox.Backend
	// NoEgress skips the allowlist network check (a backend that has no
	// relay to the egress proxy yet).
	NoEgress bool
}

// BaseEnv is the base environment of the suite's sandboxes.
var BaseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"LANG=C",
	"SANDBOXTEST_VAR=marker",
}

// secretEnv is set in the test process; no sandbox may see it.
const secretEnv = "AGENTRUN_SANDBOXTEST_SECRET"

// Run runs the conformance suite against backend b.
func Run(t *testing.T, b sandbox.Backend, opts Options) {
	ctx := context.Background()
	if err := b.Preflight(ctx); err != nil {
		t.Fatalf("preflight %s: %v", b.Name(), err)
	}
	t.Setenv(secretEnv, "leaked")
	ref := opts.Reference
	if ref == nil {
		ref = host.New()
	}
	subject := startEnv(t, b, opts.Spec)
	twin := startEnv(t, ref, nil)
	for _, s := range steps() {
		ok := t.Run(s.name, func(t *testing.T) {
			o := s.do(subject)
			if o.Err != "" {
				t.Fatalf("%s: transport or runner failure: %s", b.Name(), o.Err)
			}
			s.check(t, subject, o)
			if s.noTwin {
				return
			}
			r := s.do(twin)
			got, want := encode(o), encode(r)
			if got != want {
				t.Errorf("%s and %s differ:\n%s: %s\n%s: %s", b.Name(), ref.Name(), b.Name(), got, ref.Name(), want)
			}
		})
		if !ok && s.fatal {
			t.FailNow()
		}
	}
	t.Run("egress/no-proxy-env-without-allowlist", func(t *testing.T) {
		res, err := subject.cl.Exec(ctx, runner.ExecRequest{Shell: `echo "${HTTP_PROXY:-unset}"`}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != "unset" {
			t.Fatalf("network none: HTTP_PROXY is %q", got)
		}
	})
	runOwnSandboxes(t, b, ref, opts)
	t.Run("Stop", func(t *testing.T) {
		for _, e := range []*env{subject, twin} {
			// A command still running when the sandbox stops is ended:
			// its Exec returns instead of waiting for it.
			returned := make(chan error, 1)
			go func() {
				_, err := e.cl.Exec(ctx, runner.ExecRequest{Shell: "sleep 100 & echo started > started; wait", KillGrace: 300 * time.Millisecond}, nil, nil)
				returned <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); ; {
				if _, err := os.Stat(filepath.Join(e.host, "started")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the command did not start")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := e.sb.Stop(ctx); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if err := e.sb.Stop(ctx); err != nil {
				t.Fatalf("second stop: %v", err)
			}
			select {
			case <-returned:
			case <-time.After(15 * time.Second):
				t.Fatal("an exec running at Stop never returned")
			}
			if _, err := e.cl.Stat(ctx, runner.StatRequest{Path: "."}); err == nil {
				t.Error("the runner still answers after Stop")
			}
		}
	})
	t.Run("Destroy", func(t *testing.T) {
		for _, e := range []*env{subject, twin} {
			if err := e.sb.Destroy(ctx); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			if err := e.sb.Destroy(ctx); err != nil {
				t.Fatalf("second destroy: %v", err)
			}
			if _, err := os.Stat(e.spec.StateDir); !os.IsNotExist(err) {
				t.Errorf("state dir %s left after Destroy (%v)", e.spec.StateDir, err)
			}
			if _, err := os.Stat(filepath.Join(e.host, "README.md")); err != nil {
				t.Errorf("workspace damaged by Destroy: %v", err)
			}
		}
	})
}

// env is one started sandbox over one fixture.
type env struct {
	sb   sandbox.Sandbox
	cl   runner.Client
	spec sandbox.Spec
	host string // host path of the workspace
}

func startEnv(t testing.TB, b sandbox.Backend, adjust func(*sandbox.Spec)) *env {
	t.Helper()
	spec, ws := fixtureSpec(t, adjust)
	sb, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start %s: %v", b.Name(), err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return &env{sb: sb, cl: sb.Runner(), spec: spec, host: ws}
}

// runOwnSandboxes runs the cases that start a sandbox of their own: what
// b shows of the host's files read-only, and egress.
func runOwnSandboxes(t *testing.T, b, ref sandbox.Backend, opts Options) {
	if b.Isolation().Files {
		// (Without files of its own, /tmp is the host's.)
		t.Run("files/read-only-under-tmp", func(t *testing.T) { runReadOnlyUnderTmp(t, b, opts.Spec) })
	}
	if !opts.NoEgress {
		t.Run("egress/allowlist-relay", func(t *testing.T) { runEgress(t, b, ref, opts.Spec) })
		if b.Isolation().Network {
			// (Without a network of its own, the host's loopback is the
			// sandbox's: nothing to forward.)
			t.Run("egress/host-loopback", func(t *testing.T) { runHostLoopback(t, b, opts.Spec) })
		}
	}
}

// fixtureSpec makes a fresh fixture (removed at the end of the test) and
// the spec of a sandbox over it, adjusted by adjust when it is set. ws is
// the fixture's workspace.
func fixtureSpec(t testing.TB, adjust func(*sandbox.Spec)) (spec sandbox.Spec, ws string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbt-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	ws = makeFixture(t, dir)
	spec = sandbox.Spec{
		RunID:     "sandboxtest",
		Workspace: ws,
		Home:      filepath.Join(dir, "home"),
		StateDir:  filepath.Join(dir, "state"),
		Env:       append([]string(nil), BaseEnv...),
		Network:   sandbox.NetworkNone,
	}
	must(t, os.MkdirAll(spec.Home, 0o700))
	if adjust != nil {
		adjust(&spec)
	}
	return spec, ws
}

// outcome is what a step observed, normalised for comparison.
type outcome struct {
	Result any    `json:"result,omitempty"`
	Code   string `json:"code,omitempty"` // OpError code
	Err    string `json:"err,omitempty"`  // any other error
}

func encode(o outcome) string {
	b, err := json.Marshal(o)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return string(b)
}

func result(v any, err error) outcome {
	if err != nil {
		var oe *runner.OpError
		if asOp(err, &oe) {
			return outcome{Code: oe.Code}
		}
		return outcome{Err: err.Error()}
	}
	return outcome{Result: v}
}

func asOp(err error, target **runner.OpError) bool {
	oe, ok := err.(*runner.OpError)
	if ok {
		*target = oe
	}
	return ok
}

// norm replaces the workspace path as processes see it.
func (e *env) norm(s string) string {
	if w := e.sb.WorkDir(); w != "" {
		s = strings.ReplaceAll(s, w, "$WORK")
	}
	return strings.ReplaceAll(s, e.host, "$WORK")
}

type step struct {
	name   string
	do     func(e *env) outcome
	check  func(t *testing.T, e *env, o outcome)
	noTwin bool // the outcome depends on timing or pids
	fatal  bool // later steps make no sense if this fails
}

func bg() context.Context { return context.Background() }
