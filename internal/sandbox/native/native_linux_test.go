package native_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/sandbox/sandboxtest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func start(t *testing.T, b *native.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

func run(t *testing.T, sb sandbox.Sandbox, script string) *runner.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: script}, nil, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

func TestConformance(t *testing.T) {
	b := requireNative(t)
	sandboxtest.Run(t, b, sandboxtest.Options{})
}

func BenchmarkConformance(b *testing.B) {
	sandboxtest.Bench(b, requireNative(b), sandboxtest.Options{})
}

func TestToolchainsAndWrites(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	testsupport.RepoAt(t, spec.Workspace, nil)
	sb := start(t, b, spec)
	if sb.WorkDir() != native.WorkDir {
		t.Fatalf("WorkDir = %q", sb.WorkDir())
	}
	script := `set -e
ls / >/dev/null
git --version
git status --porcelain --branch
echo w > /workspace/from-sandbox
echo t > /tmp/t && cat /tmp/t
echo h > "$HOME/h" && cat "$HOME/h"
echo s > /dev/shm/s && cat /dev/shm/s
perl -e 'exit(syscall(39) > 0 ? 0 : 1)'
test "$(hostname)" = agentrun
echo done`
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		script += "\ngo version"
	}
	res := run(t, sb, script)
	if res.ExitCode != 0 {
		t.Fatalf("toolchain script failed: %d\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	out := string(res.Stdout)
	for _, want := range []string{"git version", "## main", "t\nh\ns\n", "done"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	fi, err := os.Stat(filepath.Join(spec.Workspace, "from-sandbox"))
	if err != nil {
		t.Fatalf("the workspace write is not on the host: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
		t.Errorf("file written inside is owned by uid %d, want %d", st.Uid, os.Getuid())
	}
	if _, err := os.Stat(filepath.Join(spec.Home, "h")); err != nil {
		t.Errorf("HOME write is not in the spec's home: %v", err)
	}
}

// TestEtcLinksKept: an /etc entry that links into /usr (the time zone,
// os-release) is the same link inside, so tools that read the link (ICU
// names the zone by it) find what they find on the host, and the link
// cannot be used to write through.
func TestEtcLinksKept(t *testing.T) {
	b := requireNative(t)
	var checks []string
	for _, name := range []string{"localtime", "os-release"} {
		target, err := filepath.EvalSymlinks("/etc/" + name)
		if fi, lerr := os.Lstat("/etc/" + name); err != nil || lerr != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		checks = append(checks, fmt.Sprintf(`test "$(readlink /etc/%s)" = %q && cat /etc/%s >/dev/null`, name, target, name))
	}
	if len(checks) == 0 {
		t.Fatal("neither /etc/localtime nor /etc/os-release is a link on this host: nothing to check")
	}
	spec := newSpec(t)
	sb := start(t, b, spec)
	res := run(t, sb, strings.Join(checks, " && ")+` && ! (echo x > /etc/localtime) 2>/dev/null && echo ok`)
	if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "ok") {
		t.Fatalf("links: %d\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func TestEnforcedIsHonest(t *testing.T) {
	b := requireNative(t)
	sb := start(t, b, newSpec(t))
	enf := sb.Enforced()
	for _, k := range []string{"namespaces", "userns", "seccomp", "landlock", "landlock_net", "no_new_privs", "caps",
		"rlimit_fsize", "rlimit_nofile", "rlimit_nproc", "rlimit_core", "memory", "pids", "cpu"} {
		v, ok := enf[k]
		if !ok {
			t.Errorf("Enforced lacks %q", k)
			continue
		}
		if v != "enforced" && !strings.HasPrefix(v, "enforced: ") && !strings.HasPrefix(v, "unavailable: ") {
			t.Errorf("Enforced[%q] = %q", k, v)
		}
	}
	for _, k := range []string{"namespaces", "seccomp", "no_new_privs", "caps", "rlimit_fsize", "rlimit_core"} {
		if enf[k] != "enforced" {
			t.Errorf("Enforced[%q] = %q, want enforced", k, enf[k])
		}
	}
	// What is claimed is in force.
	res := run(t, sb, `grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status; ulimit -c; ulimit -f`)
	out := string(res.Stdout)
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if enf["landlock"] == "enforced" {
		res := run(t, sb, `cat /proc/self/attr/landlock/current 2>/dev/null; touch /usr/x 2>&1; echo`)
		_ = res
	}
	if enf["userns"] == "enforced" {
		res := run(t, sb, `cat /proc/self/uid_map`)
		f := strings.Fields(string(res.Stdout))
		if len(f) != 3 || f[0] != strconv.Itoa(os.Getuid()) || f[2] != "1" {
			t.Errorf("uid_map = %q, want only our own uid", res.Stdout)
		}
	}
}

func TestMemoryBomb(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.Limits.MemoryBytes = 128 << 20
	r := sh(t, b, spec, `head -c 400000000 /dev/zero | tail -c 300000000 > /dev/null; echo tail=$?`)
	switch v := r.enforced["memory"]; {
	case v == "enforced", strings.HasPrefix(v, "enforced: "):
		if strings.Contains(r.stdout, "tail=0") {
			t.Fatalf("a 300 MB buffer fit in a 128 MiB sandbox:\n%v", r)
		}
		t.Logf("bounded: %v", r)
	case strings.HasPrefix(v, "unavailable: "):
		t.Logf("memory limit not available here, and Enforced says so: %s", v)
	default:
		t.Fatalf("Enforced[memory] = %q", v)
	}
}

// TestEgressAllowlist checks the only way out: the runner's bridge on
// 127.0.0.1:3128 relays to the host's proxy socket (here an echo server).
func TestEgressAllowlist(t *testing.T) {
	b := requireNative(t)
	requirePerl(t)
	spec := newSpec(t)
	proxy := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "echo:%s", line)
			}()
		}
	}()
	spec.Network = sandbox.NetworkAllowlist
	spec.ProxySocket = proxy
	sb := start(t, b, spec)
	res := run(t, sb, `echo "$HTTP_PROXY $https_proxy"
perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:3128", Timeout => 5) or die "connect: $!"; print $s "hello\n"; print scalar <$s>'`)
	out := string(res.Stdout)
	if res.ExitCode != 0 || !strings.Contains(out, "echo:hello") || !strings.Contains(out, "http://127.0.0.1:3128 http://127.0.0.1:3128") {
		t.Fatalf("egress through the bridge failed: %d\n%s\n%s", res.ExitCode, out, res.Stderr)
	}
	// Bypassing the bridge: another loopback port (Landlock) and an
	// outside address (no route) both fail.
	res = run(t, sb, `perl -MIO::Socket::INET -e '$l = IO::Socket::INET->new(LocalAddr => "127.0.0.1:8080", Listen => 5, ReuseAddr => 1) or exit 3; IO::Socket::INET->new(PeerAddr => "127.0.0.1:8080", Timeout => 3) or exit 1; exit 0'`)
	if sb.Enforced()["landlock_net"] == "enforced" && res.ExitCode != 1 {
		t.Errorf("connect to a loopback port other than the bridge: exit %d, want refused (1)\n%s", res.ExitCode, res.Stderr)
	}
	res = run(t, sb, `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "1.1.1.1:443", Timeout => 3) or exit 1; exit 0'`)
	if res.ExitCode == 0 {
		t.Errorf("a direct outside connection worked")
	}
}

// pidsInNamespace lists host pids whose pid namespace is ns.
func pidsInNamespace(ns string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			out = append(out, pid)
		}
	}
	return out
}

// initOf finds the sandbox init started by parent.
func initOf(t *testing.T, parent int) (pid int, ns string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cmd, []byte("__sandbox")) {
			ns, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid")
			return p, ns
		}
	}
	t.Fatalf("no sandbox init under pid %d", parent)
	return 0, ""
}

func TestDestroyLeavesNothing(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	sb := start(t, b, spec)
	_, ns := initOf(t, os.Getpid())
	res := run(t, sb, detachScript+` echo started`)
	if res.ExitCode != 0 {
		t.Fatalf("exec: %d %s", res.ExitCode, res.Stderr)
	}
	if n := len(pidsInNamespace(ns)); n < 2 {
		t.Fatalf("expected pid 1 (the runner) and a sleep in the sandbox, found %d processes", n)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	if left := pidsInNamespace(ns); len(left) > 0 {
		t.Fatalf("processes left after Destroy: %v", left)
	}
	if _, err := os.Stat(spec.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir left after Destroy: %v", err)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mi, []byte(filepath.Dir(spec.Workspace))) {
		t.Errorf("a mount of the run is left on the host:\n%s", mi)
	}
	if cg, _ := os.ReadFile("/proc/self/cgroup"); bytes.Contains(cg, []byte("agentrun-")) {
		t.Errorf("the test process was moved into a sandbox cgroup")
	}
	if m, _ := filepath.Glob("/sys/fs/cgroup/*/*/agentrun-test-*"); len(m) > 0 {
		t.Errorf("cgroups left: %v", m)
	}
}

// TestDiesWithSupervisor kills a supervisor process (this test binary in
// a helper role) and expects its sandbox to be gone with it.
func TestDiesWithSupervisor(t *testing.T) {
	b := requireNative(t)
	_ = b
	if os.Getenv("NATIVE_HELPER_SUPERVISOR") == "1" {
		return
	}
	spec := newSpec(t)
	cmd := execHelper(t, spec)
	out := bufio.NewReader(cmd.stdout)
	line, err := out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("helper: %q %v", line, err)
	}
	_, ns := initOf(t, cmd.cmd.Process.Pid)
	if n := len(pidsInNamespace(ns)); n < 2 {
		t.Fatalf("expected pid 1 (the runner) and a sleep in the sandbox, found %d", n)
	}
	cmd.cmd.Process.Kill()
	cmd.cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(pidsInNamespace(ns)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes outlived their supervisor: %v", pidsInNamespace(ns))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPreflightRefusesNetworkHost(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.Network = sandbox.NetworkHost
	_, err := b.Start(context.Background(), spec)
	if err == nil {
		t.Fatal("native started a sandbox with the host's network")
	}
	if _, ok := catalog.As(err); !ok {
		t.Fatalf("not a catalog error: %v", err)
	}
}

// TestStopEndsCallsAtOnce: a call waiting on a command when the sandbox
// is stopped fails with ErrClosed, instead of redialling a runner that is
// gone until the client's reconnect window closes.
func TestStopEndsCallsAtOnce(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	sb := start(t, b, spec)
	ctx := context.Background()
	returned := make(chan error, 1)
	go func() {
		_, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: "echo > /workspace/started; sleep 100"}, nil, nil)
		returned <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(spec.Workspace, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-returned; !errors.Is(err, runner.ErrClosed) {
		t.Fatalf("exec across Stop: %v, want %v", err, runner.ErrClosed)
	}
}

// TestStopKillsWhatLeftItsGroup: Stop returns on pid 1's word that
// nothing else runs, before the namespaces are torn down, and the word
// holds. A process that left the command's group and session (so that
// the runner's end of the command missed it) is killed and reaped by
// pid 1 first: pid 1 says so, and nothing writes into the workspace
// after Stop returned, while pid 1 waits for Destroy.
func TestStopKillsWhatLeftItsGroup(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	sb := start(t, b, spec)
	tick := filepath.Join(spec.Workspace, "tick")
	// (The command waits until the process has left its group: the
	// runner ends the group when the command returns.)
	run(t, sb, "setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /workspace/tick.new; mv /workspace/tick.new /workspace/tick; done' </dev/null >/dev/null 2>&1 &"+
		" while [ ! -e /workspace/tick ]; do sleep 0.01; done")
	read := func() string {
		b, _ := os.ReadFile(tick)
		return string(b)
	}
	// Alive after its command ended: it escaped the group.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if a := read(); a != "" {
			time.Sleep(50 * time.Millisecond)
			if read() != a {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the process that left its group is not running after its command ended")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-native.StoppedByInit(sb):
	case <-time.After(5 * time.Second):
		t.Fatal("pid 1 never said that nothing else runs: what left its group was not killed and reaped by it")
	}
	after := read()
	time.Sleep(200 * time.Millisecond)
	if now := read(); now != after {
		t.Fatalf("the workspace changed after Stop returned: tick %q, then %q", after, now)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(spec.StateDir); !os.IsNotExist(err) {
		t.Fatalf("state dir after Destroy: %v", err)
	}
}

func TestPreflightErrorsAreCatalogErrors(t *testing.T) {
	for name, exe := range map[string]string{
		"missing binary":  filepath.Join(t.TempDir(), "nope"),
		"not the sandbox": "/bin/true",
	} {
		t.Run(name, func(t *testing.T) {
			err := native.New(native.Options{Executable: exe}).Preflight(context.Background())
			ce, ok := catalog.As(err)
			if !ok || ce.Code != catalog.SandboxPreflight.Code || ce.Fix == "" || !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("got %v (%#v), want a sandbox_preflight catalog error with a fix", err, ce)
			}
		})
	}
}

// TestLongStateDir: a state dir too deep for a unix socket path still
// works (the socket is reached through a held directory descriptor).
func TestLongStateDir(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.StateDir = filepath.Join(spec.StateDir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	sb := start(t, b, spec)
	if res := run(t, sb, "echo ok"); string(res.Stdout) != "ok\n" {
		t.Fatalf("exec: %+v", res)
	}
	if fi, err := os.Stat(filepath.Join(spec.StateDir, "runner.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("runner socket: %v %v", fi, err)
	}
}

// TestCgroupLimitsInForce reads back, from the host, the limits of the
// cgroups the init runs in, for every one Enforced claims.
func TestCgroupLimitsInForce(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.Limits = sandbox.Limits{MemoryBytes: 100 << 20, Pids: 100, CPUs: 0.5}
	sb := start(t, b, spec)
	pid, _ := initOf(t, os.Getpid())
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		f := strings.SplitN(line, ":", 3)
		for _, c := range strings.Split(f[1], ",") {
			paths[c] = f[2]
		}
	}
	want := map[string][2]string{
		"memory": {"memory.limit_in_bytes", strconv.Itoa(100 << 20)},
		"pids":   {"pids.max", "100"},
		"cpu":    {"cpu.cfs_quota_us", "50000"},
	}
	enf := sb.Enforced()
	checked := 0
	for ctrl, w := range want {
		if enf[ctrl] != "enforced" {
			t.Logf("%s: %s", ctrl, enf[ctrl])
			continue
		}
		p, ok := paths[ctrl]
		if !ok || !strings.Contains(p, "agentrun-") {
			t.Logf("%s is not a v1 controller here (%q); skipping the read-back", ctrl, p)
			continue
		}
		got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, p, w[0]))
		if err != nil {
			t.Fatalf("%s claimed enforced: %v", ctrl, err)
		}
		if strings.TrimSpace(string(got)) != w[1] {
			t.Errorf("%s/%s = %q, want %s", ctrl, w[0], got, w[1])
		}
		checked++
	}
	t.Logf("read back %d cgroup limits", checked)
}

// TestSurvivesThreadExit: the sandbox must die with its supervisor
// process, not with the OS thread that happened to start it (Pdeathsig
// is per thread; the runtime ends a thread when a goroutine locked to it
// returns).
func TestSurvivesThreadExit(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	got := make(chan sandbox.Sandbox, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread exits with the goroutine
		sb, err := b.Start(context.Background(), spec)
		if err != nil {
			t.Error(err)
		}
		got <- sb
	}()
	sb := <-got
	if sb == nil {
		t.FailNow()
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	time.Sleep(200 * time.Millisecond)
	if res := run(t, sb, "echo alive"); string(res.Stdout) != "alive\n" {
		t.Fatalf("sandbox after its starting thread exited: %+v", res)
	}
}
