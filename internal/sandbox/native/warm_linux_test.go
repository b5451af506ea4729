package native_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/sandbox/sandboxtest"
)

// startedAhead starts every sandbox from an init started ahead (Prewarm
// just before Start, which takes it: the handover is what is tested).
type startedAhead struct{ *native.Backend }

func (b startedAhead) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.Prewarm(context.Background())
	return b.Backend.Start(ctx, spec)
}

// The conformance suite holds for sandboxes whose init was started ahead.
func TestConformanceStartedAhead(t *testing.T) {
	sandboxtest.Run(t, startedAhead{requireNative(t)}, sandboxtest.Options{})
}

// prewarmed starts an init ahead for b's next Start, for ctx, and returns
// its pid (never 0: the test fails if none was started).
func prewarmed(ctx context.Context, t *testing.T, b *native.Backend) int {
	t.Helper()
	b.Prewarm(ctx)
	pid := native.WarmPid()
	if pid == 0 {
		t.Fatal("Prewarm started no init")
	}
	return pid
}

func tookWarm(sb sandbox.Sandbox) bool {
	return slices.ContainsFunc(native.StartMarks(sb), func(m native.Mark) bool { return m.Step == "host-warm-taken" })
}

// An init started ahead is the next sandbox's pid 1: the sandbox serves,
// enforces what a sandbox started at once enforces, and its init's
// output goes to the sandbox's log.
func TestStartTakesTheInitStartedAhead(t *testing.T) {
	b := requireNative(t)
	ctx := context.Background()
	pid := prewarmed(ctx, t, b)
	b.Prewarm(ctx)
	if again := native.WarmPid(); again != pid {
		t.Fatalf("a second Prewarm started another init (%d, then %d)", pid, again)
	}
	time.Sleep(100 * time.Millisecond) // its start done, as a supervisor's would be
	spec := newSpec(t)
	sb := start(t, b, spec)
	if !tookWarm(sb) {
		t.Fatal("Start did not take the init started ahead")
	}
	if native.WarmPid() != 0 {
		t.Fatal("the init taken is still ahead")
	}
	res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: "echo hi > /workspace/x && cat /workspace/x"}, nil, nil)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if b, err := os.ReadFile(filepath.Join(spec.Workspace, "x")); err != nil || string(b) != "hi\n" {
		t.Fatalf("the workspace: %q %v", b, err)
	}
	cold := start(t, b, newSpec(t))
	if tookWarm(cold) {
		t.Fatal("a second Start found an init ahead")
	}
	warmKeys, coldKeys := slices.Sorted(maps.Keys(sb.Enforced())), slices.Sorted(maps.Keys(cold.Enforced()))
	if !slices.Equal(warmKeys, coldKeys) {
		t.Fatalf("enforced: %v started ahead, %v at once", warmKeys, coldKeys)
	}
	// The same words, but for the names of each sandbox's own cgroups.
	names := regexp.MustCompile(`agentrun-[a-z0-9-]+`)
	for k, v := range cold.Enforced() {
		if w := sb.Enforced()[k]; names.ReplaceAllString(w, "X") != names.ReplaceAllString(v, "X") {
			t.Errorf("%s: %q started ahead, %q at once", k, w, v)
		}
	}
	// Its stderr is the sandbox's log: a signal pid 1 handles says so
	// nowhere, but the log is the file it got.
	if _, err := os.Stat(filepath.Join(spec.StateDir, "sandbox.log")); err != nil {
		t.Fatalf("no sandbox log: %v", err)
	}
}

// waitExited waits up to 10 s for process pid to be gone, failing the
// test with why otherwise.
func waitExited(t *testing.T, pid int, why string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d)", why, pid)
		}
	}
}

// An init started ahead that no Start takes ends with its context.
func TestInitStartedAheadEndsWithItsContext(t *testing.T) {
	b := requireNative(t)
	ctx, cancel := context.WithCancel(context.Background())
	pid := prewarmed(ctx, t, b)
	cancel()
	waitExited(t, pid, "the init started ahead outlived its context")
	if native.WarmPid() != 0 {
		t.Fatal("the backend still holds the init")
	}
}

// A second Prewarm starts no second init: the one started lasts for the
// second's context instead, and one with an ended context gives it up.
func TestInitStartedAheadLastsForTheLatestContext(t *testing.T) {
	b := requireNative(t)
	first, cancelFirst := context.WithCancel(context.Background())
	pid := prewarmed(first, t, b)
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	b.Prewarm(second)
	if got := native.WarmPid(); got != pid {
		t.Fatalf("a second Prewarm made init %d beside %d", got, pid)
	}
	cancelFirst()
	time.Sleep(200 * time.Millisecond)
	if native.WarmPid() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatal("the init ended with the context it no longer lasts for")
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	b.Prewarm(ended)
	waitExited(t, pid, "Prewarm with an ended context left the init running")
	if native.WarmPid() != 0 {
		t.Fatal("the backend still holds the init")
	}
	b.Prewarm(ended)
	if native.WarmPid() != 0 {
		t.Fatal("Prewarm with an ended context started an init")
	}
}

// An init started ahead that died meanwhile is not used: Start starts
// one as it would have.
func TestStartWithoutTheInitThatDied(t *testing.T) {
	b := requireNative(t)
	pid := prewarmed(context.Background(), t, b)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExited(t, pid, "the init did not die")
	sb := start(t, b, newSpec(t))
	if tookWarm(sb) {
		t.Fatal("Start took an init that had died")
	}
	if res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Argv: []string{"true"}}, nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
}
