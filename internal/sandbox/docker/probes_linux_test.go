package docker_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/pidtemp"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The escape probes run testdata/probe (a static Go program making the raw
// calls busybox cannot) inside a real container. Every probe is an attack
// that must be refused, and it comes with a control: the same probe where
// the thing is allowed (on the host, or against an allowed target in the
// same container), which must work, so that no refusal passes because the
// probe itself is broken.

const (
	probeSecret = "agentrun-docker-probe-secret"
	innerProbe  = "/workspace/probe"
)

var probeBuild struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// probeBinary builds testdata/probe once per test process, or is
// AGENTRUN_DOCKER_TEST_PROBE, built before (for a test binary run by a
// user without a Go build cache).
func probeBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AGENTRUN_DOCKER_TEST_PROBE"); p != "" {
		return p
	}
	b := &probeBuild
	b.once.Do(func() {
		dir, err := pidtemp.MkdirTemp("agentrun-probe-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "probe")
		cmd := exec.Command("go", "build", "-o", b.path, "./testdata/probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build the probe: %v\n%s", b.err, b.out)
	}
	return b.path
}

// probeRun is one run of the probe: its exit code and output.
type probeRun struct {
	code int
	out  string
}

func (r probeRun) String() string {
	return fmt.Sprintf("exit %d: %s", r.code, strings.TrimSpace(r.out))
}

// inside runs the probe in sb.
func inside(t *testing.T, sb sandbox.Sandbox, args ...string) probeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Argv: append([]string{innerProbe}, args...), Timeout: 60 * time.Second}, nil, nil)
	if err != nil {
		t.Fatalf("exec the probe %v: %v", args, err)
	}
	return probeRun{res.ExitCode, string(res.Stdout) + string(res.Stderr) + res.Signal}
}

// onHost runs the probe (or bin) on the host, as this test's user, or as
// cred.
func onHost(t *testing.T, bin string, cred *syscall.Credential, args ...string) probeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if bin == "" {
		bin = probeBinary(t)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run the probe on the host %v: %v", args, err)
	}
	return probeRun{code, string(out)}
}

// hostTargets are what the probes attack on the host.
type hostTargets struct {
	runDir, otherRun, homeSecret, rootSecret string
	engineSock, abstract                     string
	loopback, external                       string // host:port of host listeners
	sleepPid                                 int
	setuid, setuidCtl                        string // a setuid-root probe in the workspace, and its copy the control runs
}

// plantTargets makes the host side: secrets outside the sandbox, a host
// process, TCP listeners on loopback and the external address, an
// abstract unix socket, and (as root) a setuid-root copy of the probe in
// the workspace.
func plantTargets(t *testing.T, spec sandbox.Spec) *hostTargets {
	t.Helper()
	tg := &hostTargets{runDir: filepath.Dir(spec.Workspace)}
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(probeSecret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(tg.runDir, "secret.txt"))
	tg.otherRun = filepath.Join(t.TempDir(), "runs", "other")
	write(filepath.Join(tg.otherRun, "workspace", "secret.txt"))
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".agentrun-probe-docker-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(t.TempDir()))
		if os.WriteFile(p, []byte(probeSecret), 0o600) == nil {
			tg.homeSecret = p
			t.Cleanup(func() { os.Remove(p) })
		}
	}
	if os.Getuid() == 0 {
		tg.rootSecret = "/root/.agentrun-probe-docker-root-" + strconv.Itoa(os.Getpid())
		write(tg.rootSecret)
		t.Cleanup(func() { os.Remove(tg.rootSecret) })
	}
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	tg.sleepPid = sleep.Process.Pid

	listen := func(network, addr string) string {
		t.Helper()
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		testsupport.Echo(t, ln)
		return ln.Addr().String()
	}
	tg.loopback = listen("tcp", "127.0.0.1:0")
	if ip := externalIP(); ip != "" {
		tg.external = listen("tcp", net.JoinHostPort(ip, "0"))
	}
	tg.abstract = "@agentrun-probe-docker-" + strconv.Itoa(os.Getpid())
	listen("unix", tg.abstract)
	if u, err := url.Parse(os.Getenv(hostEnv)); err == nil && u.Scheme == "unix" {
		tg.engineSock = u.Path
	}
	if os.Getuid() == 0 {
		tg.setuid = filepath.Join(spec.Workspace, "suid-probe")
		// The control runs a copy as nobody, who cannot reach the test's
		// temp dirs; the same bits, owner and mode.
		dir, err := os.MkdirTemp("", "agentrun-suid-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		tg.setuidCtl = filepath.Join(dir, "suid-probe")
		for _, p := range []string{tg.setuid, tg.setuidCtl} {
			copyFile(t, probeBinary(t), p, 0o755)
			if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tg
}

func externalIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// nonEmpty drops the empty strings (targets this host does not have).
func nonEmpty(s ...string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// escape is one attack and its control.
type escape struct {
	name string
	// args are the probe's arguments inside: it must be refused.
	args []string
	// errno, when set, is the refusal's errno name (EPERM, ENOENT).
	errno string
	// host is the control on the host, as cred (nil: this user), and
	// within the control inside the same container: each set must work.
	host   []string
	cred   *syscall.Credential
	within []string
	// hostBin runs the host control instead of the probe binary.
	hostBin string
	// needs is why this host cannot run the probe or its control ("" = it can).
	needs string
}

// probeSandbox starts a sandbox for the probes with the probe in its
// workspace (and a file of the secret, for the read control).
func probeSandbox(t *testing.T, b *docker.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	copyFile(t, probeBinary(t), filepath.Join(spec.Workspace, "probe"), 0o755)
	if err := os.WriteFile(filepath.Join(spec.Workspace, "own-secret.txt"), []byte(probeSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	return start(t, b, spec)
}

// runEscapes runs each probe and its controls, one after the other (they
// share sb).
func runEscapes(t *testing.T, sb sandbox.Sandbox, probes []escape) {
	t.Helper()
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			if p.host == nil && p.within == nil {
				t.Fatal("a probe without a control could pass vacuously")
			}
			testsupport.Require(t, "what the probe or its control needs", p.needs == "", "%s", p.needs)
			if p.host != nil {
				if r := onHost(t, p.hostBin, p.cred, p.host...); r.code != 0 {
					t.Fatalf("the control on the host did not work (the probe is broken?): %v", r)
				}
			}
			if p.within != nil {
				if r := inside(t, sb, p.within...); r.code != 0 {
					t.Fatalf("the control inside did not work (the probe is broken?): %v", r)
				}
			}
			r := inside(t, sb, p.args...)
			if r.code == 0 {
				t.Fatalf("the attack worked: %v", r)
			}
			if r.code == 2 {
				t.Fatalf("the probe could not try: %v", r)
			}
			if p.errno != "" && !strings.Contains(r.out, "errno="+p.errno) {
				t.Fatalf("want a refusal with %s: %v", p.errno, r)
			}
			t.Logf("blocked: %v", r)
		})
	}
}

// rootOnly is why a control needs root on the host ("" when it has it).
func rootOnly(what string) string {
	if os.Getuid() == 0 {
		return ""
	}
	return what + " needs root on the host"
}

// TestEscapeProbes attacks a running container from inside: the host's
// files, the read-only root and /.agentrun, the host's network and
// sockets, the engine, host processes, the runner's /proc, privilege
// through setuid, and the syscalls that make namespaces, mounts, keys and
// BPF programs.
func TestEscapeProbes(t *testing.T) {
	b, image := requireEngine(t)
	spec := newSpec(t, image)
	spec.RunID = "probe-" + itoa(os.Getpid())
	spec.Network = sandbox.NetworkAllowlist
	spec.ProxySocket = echoSocket(t)
	spec.GatewaySocket = echoSocket(t)
	tg := plantTargets(t, spec)
	victim := filepath.Join(spec.Workspace, "victim")
	if err := os.WriteFile(victim, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := testsupport.Agentrun(t)
	exeBefore, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sb := probeSandbox(t, b, spec)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	readAt := func(paths ...string) []string { return append([]string{"read", probeSecret}, nonEmpty(paths...)...) }
	secret := filepath.Join(tg.runDir, "secret.txt")
	probes := []escape{
		{name: "read the run directory", args: readAt(tg.runDir, secret, "/workspace/../secret.txt", "/proc/self/root"+secret, "/proc/1/root"+secret, "/proc/1/cwd/../secret.txt"),
			host: readAt(secret), within: readAt("/workspace/own-secret.txt")},
		{name: "read another run", args: readAt(tg.otherRun, filepath.Dir(tg.otherRun)), host: readAt(tg.otherRun), within: readAt("/workspace")},
		{name: "read a secret in the user's home", args: readAt(tg.homeSecret, filepath.Dir(tg.homeSecret), "/home", "/root"),
			host: readAt(tg.homeSecret), within: readAt("/workspace"), needs: map[bool]string{true: "no home directory"}[tg.homeSecret == ""]},
		{name: "read /root", args: readAt(tg.rootSecret, "/root", "/proc/1/root/root"), host: readAt(tg.rootSecret), within: readAt("/workspace"),
			needs: rootOnly("a secret in /root")},
		{name: "write the read-only root", args: []string{"write", "/probe-x", "/etc/probe-x", "/bin/probe-x", "/usr/probe-x"}, errno: "EROFS",
			within: []string{"write", "/workspace/probe-x"}},
		{name: "write /.agentrun and the agentrun binary", args: []string{"write", "/.agentrun/probe-x", "/.agentrun/agentrun"},
			within: []string{"write", "/workspace/probe-y"}},
		{name: "remove or replace the binary and the proxy and gateway sockets", args: []string{"unlink", "/.agentrun/agentrun", "/.agentrun/egress.sock", "/.agentrun/gateway.sock", "/.agentrun"},
			within: []string{"unlink", "/workspace/victim"}},
		{name: "reach host TCP on loopback", args: []string{"tcp", tg.loopback}, errno: "ECONNREFUSED", host: []string{"tcp", tg.loopback}},
		{name: "reach host TCP on its external address", args: []string{"tcp", tg.external}, host: []string{"tcp", tg.external},
			needs: map[bool]string{true: "no external IPv4 address"}[tg.external == ""]},
		{name: "reach a host abstract unix socket", args: []string{"unix", tg.abstract}, errno: "ECONNREFUSED", host: []string{"unix", tg.abstract}},
		{name: "reach the engine's socket", args: append([]string{"unix"}, nonEmpty(tg.engineSock, "/run/podman/podman.sock", "/var/run/docker.sock", "/run/docker.sock", "/run/user/0/podman/podman.sock")...),
			errno: "ENOENT", host: []string{"unix", tg.engineSock}},
		{name: "signal a host process", args: []string{"kill", itoa(tg.sleepPid)}, errno: "ESRCH", host: []string{"kill", itoa(tg.sleepPid)}},
		// The filter refuses ptrace whatever the target (EPERM); the
		// controls show the probe attaches where ptrace is allowed.
		{name: "ptrace a host process", args: []string{"ptrace", itoa(tg.sleepPid)}, errno: "EPERM", host: []string{"ptrace", itoa(tg.sleepPid)},
			needs: rootOnly("ptrace of another process tree")},
		{name: "ptrace the init", args: []string{"ptrace", "1"}, errno: "EPERM", host: []string{"ptrace", "child"}},
		{name: "ptrace the runner", args: []string{"ptrace", "cmd:__docker serve"}, errno: "EPERM", host: []string{"ptrace", "child"}},
		{name: "read the init's environ, mem and fds", args: []string{"proc", "1", "environ", "mem", "fd", "root", "cwd"}, errno: "EACCES",
			within: []string{"proc", "child", "environ", "mem", "fd"}},
		{name: "read the runner's environ, mem and fds", args: []string{"proc", "cmd:__docker serve", "environ", "mem", "fd", "root", "cwd"}, errno: "EACCES",
			within: []string{"proc", "child", "environ", "mem", "fd"}},
		{name: "gain privilege through a setuid binary in the workspace", args: []string{"exec-caps", "/workspace/suid-probe"},
			host: []string{"caps"}, hostBin: tg.setuidCtl, cred: nobody, needs: rootOnly("a setuid-root binary")},
		{name: "mount", args: []string{"mount", "/tmp/probe-mnt"}, errno: "EPERM", host: []string{"mount", filepath.Join(t.TempDir(), "mnt")},
			needs: rootOnly("mount")},
		{name: "unshare a mount namespace", args: []string{"unshare"}, errno: "EPERM", host: []string{"unshare"}, needs: rootOnly("unshare")},
		{name: "make a user namespace", args: []string{"userns"}, errno: "EPERM", host: []string{"userns"}},
		{name: "keyctl", args: []string{"keyctl"}, errno: "EPERM", host: []string{"keyctl"}},
		{name: "bpf", args: []string{"bpf"}, errno: "EPERM", host: []string{"bpf"}, needs: rootOnly("bpf")},
	}
	// The privileged calls that the other backends' filters refuse; each
	// is made so that, where it works, it changes nothing on the host.
	for _, c := range []string{"reboot", "swapon", "open_by_handle_at", "fsopen", "open_tree", "chroot", "sethostname",
		"mknod", "raw_socket", "packet_socket", "userfaultfd", "perf_event_open", "io_uring_setup"} {
		probes = append(probes, escape{name: "call " + c, args: []string{"sys", c}, host: []string{"sys", c}, needs: rootOnly(c)})
	}
	runEscapes(t, sb, probes)
	if after, err := os.ReadFile(exe); err != nil || string(after) != string(exeBefore) {
		t.Errorf("the agentrun binary changed on the host")
	}
}

// TestLimitProbes pushes past the limits from inside: processes past the
// pids bound, /tmp past its size, memory past its bound (the last: the
// kernel ends the probe).
func TestLimitProbes(t *testing.T) {
	b, image := requireEngine(t)
	spec := newSpec(t, image)
	spec.RunID = "limits-" + itoa(os.Getpid())
	spec.Limits = sandbox.Limits{Pids: 64, MemoryBytes: 256 << 20, DiskBytes: 16 << 20}
	sb := probeSandbox(t, b, spec)
	runEscapes(t, sb, []escape{
		{name: "fork past the pids limit", args: []string{"fork", "200"}, errno: "EAGAIN", within: []string{"fork", "8"}, host: []string{"fork", "200"}},
		{name: "fill /tmp past its size", args: []string{"fill", "/tmp", "64"}, errno: "ENOSPC", within: []string{"fill", "/tmp", "4"},
			host: []string{"fill", t.TempDir(), "64"}},
		{name: "hold memory past the limit", args: []string{"alloc", "768"}, within: []string{"alloc", "32"}, host: []string{"alloc", "768"}},
	})
	// The container lives on past the memory probe: only the probe ended.
	if r := inside(t, sb, "sleep", "0"); r.code != 0 {
		t.Fatalf("the sandbox after the memory probe: %v", r)
	}
}
