package native_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// sysProbe is a perl script that makes one raw syscall and exits 0 only
// if the kernel accepted it; on failure it prints errno=N.
func sysProbe(nr uintptr, args string) string {
	// perl's syscall() may write into string arguments: give it variables.
	n := 0
	args = stringLit.ReplaceAllStringFunc(args, func(lit string) string {
		n++
		return fmt.Sprintf("(my $v%d = %s)", n, lit)
	})
	if args != "" {
		args = ", " + args
	}
	return fmt.Sprintf(`perl -e '$r = syscall(%d%s); if ($r == -1) { printf "errno=%%d\n", $!+0; exit 1 } exit 0'`, nr, args)
}

var stringLit = regexp.MustCompile(`"[^"]*"`)

func requirePerl(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		requireCap(t, "perl", "the syscall probes use perl's syscall()")
	}
}

type probe struct {
	name   string
	script string // exits 0 only if the attack worked
	errno  unix.Errno
	spec   func(*sandbox.Spec)
	check  func(t *testing.T, r result)
}

// plant makes the host-side targets the probes attack.
type targets struct {
	runDir, otherRun, homeSecret, rootSecret, engineSock, abstract string
	sleepPid                                                       int
	tcpPort, extPort                                               int
	extIP                                                          string
}

const secretText = "agentrun-probe-secret"

func plant(t *testing.T, runDir string) *targets {
	t.Helper()
	tg := &targets{runDir: runDir}
	write := func(p string) {
		if err := os.WriteFile(p, []byte(secretText), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(runDir, "secret.txt"))
	tg.otherRun = filepath.Join(t.TempDir(), "other-run")
	if err := os.MkdirAll(filepath.Join(tg.otherRun, "workspace"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(tg.otherRun, "workspace", "secret.txt"))
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".agentrun-probe-native-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(t.TempDir()))
		if os.WriteFile(p, []byte(secretText), 0o600) == nil {
			tg.homeSecret = p
			t.Cleanup(func() { os.Remove(p) })
		}
	}
	if os.Getuid() == 0 {
		tg.rootSecret = "/root/.agentrun-probe-native-root-" + strconv.Itoa(os.Getpid())
		write(tg.rootSecret)
		t.Cleanup(func() { os.Remove(tg.rootSecret) })
	}
	sleep := exec.Command("sleep", "299.5")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	tg.sleepPid = sleep.Process.Pid

	accepted := make(chan string, 16)
	serve := func(ln net.Listener) {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- ln.Addr().String()
				c.Close()
			}
		}()
	}
	t.Cleanup(func() {
		select {
		case a := <-accepted:
			t.Errorf("a host listener accepted a connection from the sandbox: %s", a)
		default:
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(ln)
	tg.tcpPort = ln.Addr().(*net.TCPAddr).Port
	if ip := externalIP(); ip != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err == nil {
			serve(ln)
			tg.extIP, tg.extPort = ip, ln.Addr().(*net.TCPAddr).Port
		}
	}
	tg.engineSock = filepath.Join(runDir, "podman.sock")
	uln, err := net.Listen("unix", tg.engineSock)
	if err != nil {
		t.Fatal(err)
	}
	serve(uln)
	tg.abstract = "agentrun-probe-native-" + strconv.Itoa(os.Getpid()) + "-" + filepath.Base(t.TempDir())
	aln, err := net.Listen("unix", "@"+tg.abstract)
	if err != nil {
		t.Fatal(err)
	}
	serve(aln)
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

// prefixed is prefix+p, or "" when p is "" (no such target here).
func prefixed(prefix, p string) string {
	if p == "" {
		return ""
	}
	return prefix + p
}

const secretEnv = "AGENTRUN_PROBE_SUPERVISOR_SECRET"

// TestProbes attacks a real sandbox: every probe is a real command inside
// a fresh sandbox and must fail.
func TestProbes(t *testing.T) {
	b := requireNative(t)
	requirePerl(t)
	base := newSpec(t)
	runDir := filepath.Dir(base.Workspace)
	tg := plant(t, runDir)
	os.Setenv(secretEnv, secretText)
	t.Cleanup(func() { os.Unsetenv(secretEnv) })
	hostname, _ := os.Hostname()
	exe := testsupport.Agentrun(t)
	exeBefore, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}

	catAny := func(paths ...string) string {
		var s []string
		for _, p := range paths {
			if p != "" {
				s = append(s, "grep -rqs "+secretText+" "+p+" && exit 0")
			}
		}
		return strings.Join(s, "; ") + "; exit 1"
	}
	probes := []probe{
		{name: "read the run directory", script: catAny(runDir, filepath.Join(runDir, "secret.txt"), "/workspace/../secret.txt")},
		{name: "read another run", script: catAny(tg.otherRun, filepath.Join(tg.otherRun, "workspace", "secret.txt"))},
		{name: "read a secret in the user's home", script: catAny(tg.homeSecret, filepath.Dir(tg.homeSecret)+"/.agentrun-probe-*", "/home", "/root")},
		{name: "read /root", script: catAny(tg.rootSecret, "/root")},
		{name: "read through /proc/self/root", script: catAny("/proc/self/root"+filepath.Join(runDir, "secret.txt"), prefixed("/proc/self/root", tg.rootSecret), prefixed("/proc/self/root", tg.homeSecret))},
		{name: "read through /proc/1/root", script: catAny("/proc/1/root"+filepath.Join(runDir, "secret.txt"), "/proc/1/root/../../.."+filepath.Join(runDir, "secret.txt"), "/proc/1/cwd/secret.txt")},
		{name: "write outside the workspace", script: `for p in /usr/agentrun-x /etc/agentrun-x /agentrun-x /bin/agentrun-x /.agentrun/x /proc/agentrun-x /dev/agentrun-x ` + runDir + `/agentrun-x; do touch $p 2>/dev/null && echo wrote $p && exit 0; done; exit 1`},
		{name: "overwrite the agentrun binary", script: `echo x > /.agentrun/agentrun || cp /bin/sh /.agentrun/agentrun || exit 1`},
		{name: "see a host process in /proc", script: fmt.Sprintf(`test -e /proc/%d && exit 0; for d in /proc/[0-9]*; do [ "$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)" = "sleep 299.5 " ] && exit 0; done; exit 1`, tg.sleepPid)},
		{name: "signal a host process", script: fmt.Sprintf(`kill -0 %d`, tg.sleepPid)},
		{name: "ptrace with strace", script: `command -v strace >/dev/null || exit 1; strace -o /dev/null true`},
		{name: "ptrace attach pid 1", script: sysProbe(unix.SYS_PTRACE, "16, 1, 0, 0"), errno: unix.EPERM},
		{name: "mount tmpfs", script: `mkdir -p /tmp/m && mount -t tmpfs none /tmp/m`},
		{name: "mount syscall", script: sysProbe(unix.SYS_MOUNT, `"none", "/tmp", "tmpfs", 0, 0`), errno: unix.EPERM},
		{name: "mknod a block device", script: `mknod /tmp/sda b 8 0`},
		{name: "unshare a user namespace", script: `unshare -U true || unshare -r true`},
		{name: "unshare syscall", script: sysProbe(unix.SYS_UNSHARE, fmt.Sprint(unix.CLONE_NEWUSER)), errno: unix.EPERM},
		{name: "clone3", script: sysProbe(unix.SYS_CLONE3, "0, 0"), errno: unix.ENOSYS},
		{name: "keyctl", script: sysProbe(unix.SYS_KEYCTL, "0, -3, 0"), errno: unix.EPERM},
		{name: "add_key", script: sysProbe(unix.SYS_ADD_KEY, `"user", "x", "y", 1, -3`), errno: unix.EPERM},
		{name: "bpf", script: sysProbe(unix.SYS_BPF, "0, 0, 0"), errno: unix.EPERM},
		{name: "perf_event_open", script: sysProbe(unix.SYS_PERF_EVENT_OPEN, "0, 0, -1, -1, 0"), errno: unix.EPERM},
		{name: "kexec_load", script: sysProbe(unix.SYS_KEXEC_LOAD, "0, 0, 0, 0"), errno: unix.EPERM},
		// A wrong magic number: harmless even where reboot is allowed.
		{name: "reboot", script: sysProbe(unix.SYS_REBOOT, "0, 0, 0, 0"), errno: unix.EPERM},
		{name: "swapon", script: sysProbe(unix.SYS_SWAPON, `"/tmp/none", 0`), errno: unix.EPERM},
		{name: "init_module", script: sysProbe(unix.SYS_INIT_MODULE, `0, 0, ""`), errno: unix.EPERM},
		{name: "finit_module", script: sysProbe(unix.SYS_FINIT_MODULE, `0, "", 0`), errno: unix.EPERM},
		{name: "setns", script: sysProbe(unix.SYS_SETNS, "0, 0"), errno: unix.EPERM},
		{name: "open_by_handle_at", script: sysProbe(unix.SYS_OPEN_BY_HANDLE_AT, "-100, 0, 0"), errno: unix.EPERM},
		{name: "userfaultfd", script: sysProbe(unix.SYS_USERFAULTFD, "0"), errno: unix.EPERM},
		{name: "fsopen", script: sysProbe(unix.SYS_FSOPEN, `"tmpfs", 0`), errno: unix.EPERM},
		{name: "open_tree", script: sysProbe(unix.SYS_OPEN_TREE, `-100, "/workspace", 1`), errno: unix.EPERM},
		{name: "move_mount", script: sysProbe(unix.SYS_MOVE_MOUNT, `-100, "/workspace", -100, "/tmp", 0`), errno: unix.EPERM},
		{name: "io_uring_setup", script: sysProbe(unix.SYS_IO_URING_SETUP, "1, 0"), errno: unix.EPERM},
		{name: "chroot", script: `/usr/sbin/chroot /tmp /bin/true`},
		{name: "chroot syscall", script: sysProbe(unix.SYS_CHROOT, `"/tmp"`), errno: unix.EPERM},
		{name: "sethostname", script: `hostname evil-host || ` + sysProbe(unix.SYS_SETHOSTNAME, `"evil-host", 9`), check: func(t *testing.T, r result) {
			if h, _ := os.Hostname(); h != hostname {
				t.Errorf("host name changed to %q", h)
			}
		}},
		{name: "write /proc/sys", script: `echo 1 > /proc/sys/vm/drop_caches || echo evil > /proc/sys/kernel/hostname || echo 1 > /proc/sys/kernel/sysrq`},
		{name: "write /proc/sysrq-trigger", script: `echo h > /proc/sysrq-trigger`},
		{name: "read /sys secrets", script: `cat /sys/class/dmi/id/product_uuid || ls /sys/fs/cgroup || cat /sys/kernel/security/lsm`},
		{name: "read host devices", script: `head -c1 /dev/mem || head -c1 /dev/vda || head -c1 /dev/sda || head -c1 /dev/kmsg`},
		{name: "raw socket", script: `perl -MSocket -e 'socket(my $s, PF_INET, SOCK_RAW, 1) or do { printf "errno=%d\n", $!+0; exit 1 }; exit 0'`},
		{name: "packet socket", script: `perl -MSocket -e 'socket(my $s, 17, SOCK_RAW, 0) or do { printf "errno=%d\n", $!+0; exit 1 }; exit 0'`},
		{name: "connect to the host's loopback", script: fmt.Sprintf(`perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "127.0.0.1:%d", Timeout => 3) or exit 1; exit 0'`, tg.tcpPort)},
		{name: "connect to an outside address", script: `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "1.1.1.1:443", Timeout => 3) or exit 1; exit 0'`},
		{name: "connect to the host's own address", script: fmt.Sprintf(`test -n "%s" || exit 1; perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "%s:%d", Timeout => 3) or exit 1; exit 0'`, tg.extIP, tg.extIP, tg.extPort)},
		{name: "reach a container engine socket", script: fmt.Sprintf(`for s in %s /run/podman/podman.sock /var/run/docker.sock /run/docker.sock; do perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 1; exit 0' $s && exit 0; done; exit 1`, tg.engineSock)},
		{name: "reach a host abstract socket", script: fmt.Sprintf(`perl -MSocket -e 'socket(my $s, PF_UNIX, SOCK_STREAM, 0) or exit 2; connect($s, pack_sockaddr_un("\0%s")) or exit 1; exit 0'`, tg.abstract)},
		{name: "read the supervisor's environment", script: `cat /proc/1/environ /proc/$PPID/environ /proc/self/environ 2>/dev/null | tr '\0' '\n' | grep -q ` + secretText + ` && exit 0; env | grep -q ` + secretText + ` && exit 0; grep -rqs ` + secretText + ` /proc/[0-9]*/environ && exit 0; exit 1`},
		{name: "gain privilege through a setuid binary", script: `grep -q '^NoNewPrivs:.*1' /proc/self/status || exit 0
awk '($5 == "/workspace" || $5 == "/usr" || $5 == "/tmp") && $6 !~ /nosuid/ { f = 1 } END { exit !f }' /proc/self/mountinfo && exit 0
cp /usr/bin/id /workspace/suid-id || exit 2
chmod 4755 /workspace/suid-id && echo "setuid bit set" && exit 0
chmod 2755 /workspace/suid-id && echo "setgid bit set" && exit 0
perl -e 'sysopen(my $f, "/workspace/suid-new", 0101, 04755) or exit 1; exit 0' && [ -u /workspace/suid-new ] && echo "created setuid" && exit 0
[ "$(/workspace/suid-id -u)" != "$(id -ru)" ] && exit 0
for b in /usr/bin/su /usr/bin/passwd /usr/bin/mount; do [ -u $b ] && [ -x $b ] && echo "setuid $b present, ignored"; done; exit 1`},
		{name: "fork bomb", spec: func(s *sandbox.Spec) { s.Limits.Pids = 64 },
			script: `perl -e 'my $n = 0; for (1..300) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 30; exit 0 } $n++ } print "forked=$n\n"; exit($n > 64 ? 0 : 1)'`,
			check: func(t *testing.T, r result) {
				var n int
				if _, err := fmt.Sscanf(strings.TrimSpace(r.stdout), "forked=%d", &n); err != nil || n < 1 {
					t.Errorf("the probe did not run: %v", r)
				}
			}},
		{name: "fill /tmp past the memory limit", spec: func(s *sandbox.Spec) { s.Limits.MemoryBytes = 32 << 20 },
			script: `head -c 50000000 /dev/zero > /tmp/big; [ $(wc -c < /tmp/big) -gt 33554432 ] && exit 0; exit 1`},
		{name: "file past the size limit", spec: func(s *sandbox.Spec) { s.Limits.FileSizeBytes = 1 << 20 },
			script: `head -c 3000000 /dev/zero > /workspace/big; [ $(wc -c < /workspace/big) -gt 1048576 ] && exit 0; exit 1`},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t)
			if p.spec != nil {
				p.spec(&spec)
			}
			r := sh(t, b, spec, p.script)
			if r.code == 0 {
				t.Fatalf("the attack worked:\n%v", r)
			}
			if p.errno != 0 && !strings.Contains(r.stdout, fmt.Sprintf("errno=%d", int(p.errno))) {
				t.Fatalf("want the kernel to refuse with %v:\n%v", p.errno, r)
			}
			if p.check != nil {
				p.check(t, r)
			}
			t.Logf("%s blocked: %v", p.name, r)
		})
	}
	t.Cleanup(func() {
		after, err := os.ReadFile(exe)
		if err != nil || string(after) != string(exeBefore) {
			t.Errorf("the agentrun binary changed on the host")
		}
	})
}
