package native_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// An init started ahead that gets a signal on which a Go program takes
// no action (SIGUSR1, SIGALRM) while it waits for its sandbox goes on
// waiting, as it did before it caught signals, and serves the next
// sandbox, which the signal does not stop.
func TestSignalledInitStartedAheadIgnores(t *testing.T) {
	b := requireNative(t)
	pid := prewarmed(context.Background(), t, b)
	time.Sleep(200 * time.Millisecond) // its start done: it waits for its config
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGALRM} {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if native.WarmPid() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatal("the init started ahead ended on a signal a Go program ignores")
	}
	sb := start(t, b, newSpec(t))
	if !tookWarm(sb) {
		t.Fatal("Start did not take the init started ahead")
	}
	for range 3 {
		if res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Argv: []string{"true"}}, nil, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %v %+v", err, res)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An init started ahead that is told to stop (SIGTERM, SIGINT, SIGHUP,
// SIGQUIT) while it waits for its sandbox exits, as it did before it
// caught signals, and is not used: Start starts another.
func TestSignalledInitStartedAheadExits(t *testing.T) {
	b := requireNative(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT} {
		pid := prewarmed(context.Background(), t, b)
		time.Sleep(200 * time.Millisecond) // its start done: it waits for its config
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
		waitExited(t, pid, sig.String()+" left the init started ahead running")
		sb := start(t, b, newSpec(t))
		if tookWarm(sb) {
			t.Fatalf("Start took the init that got %v", sig)
		}
		if res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Argv: []string{"true"}}, nil, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %v %+v", err, res)
		}
	}
}

// An init started ahead that ends after Start looked that it runs, and
// before Start gave it its files, is not used either: Start starts another
// instead of failing.
func TestStartWithoutTheInitThatEndedWhenTaken(t *testing.T) {
	b := requireNative(t)
	prewarmed(context.Background(), t, b)
	defer native.EndWarmWhenTaken()()
	sb := start(t, b, newSpec(t))
	if tookWarm(sb) {
		t.Fatal("Start used the init that ended")
	}
	if res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Argv: []string{"true"}}, nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
}

// aheadCgroups waits until pid, an init started ahead by b, is in all
// the cgroups it joins while it waits (it joins them one controller
// after another, beside its start), and lists them. Where this user may
// make none (b warns that no controller's limit would be in force), the
// test is skipped, as the cold start's leak test is.
func aheadCgroups(t *testing.T, b *native.Backend, pid int) []string {
	t.Helper()
	if w := strings.Join(b.LimitWarnings(context.Background(), sandbox.Limits{}), "; "); strings.Contains(w, "memory:") &&
		strings.Contains(w, "pids:") && strings.Contains(w, "cpu:") {
		t.Skipf("no cgroup can be made here (uid %d): %s", os.Getuid(), w)
	}
	native.WarmJoined()
	if dirs := cgroupDirsOf(t, pid); len(dirs) > 0 {
		return dirs
	}
	t.Skipf("no cgroup was made for the init started ahead here (uid %d)", os.Getuid())
	return nil
}

// An init started ahead joins its cgroups while it waits (joining costs
// an RCU grace period: it is off the start's path); the Start that takes
// it names them after its run where the hierarchy allows (v1), writes
// the sandbox's limits into them, and removes them with the sandbox.
func TestStartedAheadJoinsItsCgroupsAhead(t *testing.T) {
	b := requireNative(t)
	pid := prewarmed(context.Background(), t, b)
	ahead := aheadCgroups(t, b, pid)
	for _, d := range ahead {
		if !strings.Contains(filepath.Base(d), "agentrun-ahead-") {
			t.Errorf("cgroup %s joined ahead is not named as one", d)
		}
	}
	spec := newSpec(t)
	spec.Limits = sandbox.Limits{MemoryBytes: 100 << 20, Pids: 100, CPUs: 0.5}
	sb, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if !tookWarm(sb) {
		t.Fatal("Start did not take the init started ahead")
	}
	dirs := cgroupDirsOf(t, pid)
	if len(dirs) != len(ahead) {
		t.Fatalf("the init is in cgroups %v, was in %v", dirs, ahead)
	}
	want := map[string]string{"memory.limit_in_bytes": strconv.Itoa(100 << 20), "memory.max": strconv.Itoa(100 << 20),
		"pids.max": "100", "cpu.cfs_quota_us": "50000", "cpu.max": "50000 100000"}
	read := 0
	for _, d := range dirs {
		if strings.HasPrefix(d, "/sys/fs/cgroup/unified/") || !strings.HasPrefix(d, "/sys/fs/cgroup/") {
			continue // v2: keeps the name it was made with
		}
		if !strings.Contains(filepath.Base(d), "agentrun-"+spec.RunID+"-") {
			t.Errorf("cgroup %s is not named after run %s", d, spec.RunID)
		}
		for f, v := range want {
			if got, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				read++
				if strings.TrimSpace(string(got)) != v {
					t.Errorf("%s/%s = %q, want %s", d, f, got, v)
				}
			}
		}
	}
	for k, v := range sb.Enforced() {
		if (k == "memory" || k == "pids" || k == "cpu") && v != "enforced" {
			t.Errorf("%s: %s", k, v)
		}
	}
	if read == 0 {
		t.Fatalf("no limit read back from %v", dirs)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, d := range append(dirs, ahead...) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left after Destroy: %v", d, err)
		}
	}
}

// The cgroups an init started ahead joined go with it when no Start
// takes it.
func TestInitStartedAheadLeavesNoCgroups(t *testing.T) {
	b := requireNative(t)
	ctx, cancel := context.WithCancel(context.Background())
	pid := prewarmed(ctx, t, b)
	dirs := aheadCgroups(t, b, pid)
	cancel()
	waitExited(t, pid, "the init started ahead outlived its context")
	for _, d := range dirs {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cgroup %s left by the init started ahead", d)
			}
		}
	}
}

// openFile is what one of a process's descriptors refers to.
type openFile struct {
	link string
	fi   os.FileInfo // (its identity: a renamed file is the same)
}

// openFiles lists what pid's descriptors from 3 up refer to.
func openFiles(t *testing.T, pid int) map[string]openFile {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]openFile{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			to, err1 := os.Readlink(p)
			fi, err2 := os.Stat(p)
			if err1 == nil && err2 == nil {
				files[e.Name()] = openFile{to, fi}
			}
		}
	}
	return files
}

// An init started ahead keeps the descriptors its runtime opened while it
// waited: the listener it receives takes none of their numbers. (The
// runtime opens its cgroup's CPU limit files at start, for GOMAXPROCS,
// and keeps them, usually as fds 5 and 6: it finds them when the init has
// joined the sandbox's CPU cgroup before its runtime started, as it
// mostly has. An init that joined later holds none, and another is
// started.)
func TestInitStartedAheadKeepsTheRuntimesFiles(t *testing.T) {
	if os.Getuid() != 0 {
		// The init is not dumpable: /proc/PID/fd is not this user's to
		// read. It receives its files by the same code as root's.
		t.Skip("reading an init's descriptors takes root")
	}
	b := requireNative(t)
	var pid int
	var before map[string]openFile
	for try := 0; before == nil; try++ {
		if try == 5 {
			t.Fatalf("5 inits started ahead opened no cgroup file (the last held %v)", openFiles(t, pid))
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pid = prewarmed(ctx, t, b)
		native.WarmJoined()
		time.Sleep(300 * time.Millisecond) // its start done: it waits for its config
		for fd, f := range openFiles(t, pid) {
			if strings.Contains(f.link, "/cpu.") {
				if before == nil {
					before = map[string]openFile{}
				}
				before[fd] = f
			}
		}
		if before == nil {
			cancel()
			waitExited(t, pid, "the init started ahead outlived its context")
		}
	}
	sb := start(t, b, newSpec(t))
	if !tookWarm(sb) || native.InitPid(sb) != pid {
		t.Fatal("Start did not take the init started ahead")
	}
	after := openFiles(t, pid)
	for fd, f := range before {
		if now, ok := after[fd]; !ok || !os.SameFile(f.fi, now.fi) {
			t.Errorf("fd %s was %s while the init waited, %q once it serves", fd, f.link, now.link)
		}
	}
}
