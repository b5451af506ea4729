package native_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// privScript, run inside, lists every task of the sandbox that keeps a
// capability, and every init or runner memory file (/proc/*/mem,
// /proc/*/task/*/mem) that opens for writing. The agent's own processes
// may write their own memory; the sandbox's machinery must not be
// writable. It ends with the number of machinery mem files it tried.
const privScript = `n=0
for s in /proc/[0-9]*/task/[0-9]*/status; do
	grep -H -E '^(CapEff|CapPrm|CapAmb):' "$s" 2>/dev/null | grep -v '0000000000000000$' | sed 's/^/CAPS /'
done
for m in /proc/[0-9]*/mem /proc/[0-9]*/task/[0-9]*/mem; do
	p=${m#/proc/}; p=${p%%/*}
	case "$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)" in "agentrun __sandbox "*) ;; *) continue;; esac
	n=$((n+1))
	if (exec 3<>"$m") 2>/dev/null; then echo "WRITABLE $m"; fi
	if (exec 3>"$m") 2>/dev/null; then echo "WRITABLE $m"; fi
done
echo "checked $n"`

// checkPrivs runs privScript in sb and fails on any finding.
func checkPrivs(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	res := run(t, sb, privScript)
	out := string(res.Stdout)
	if strings.Contains(out, "CAPS ") || strings.Contains(out, "WRITABLE ") {
		t.Errorf("a task inside keeps privileges the agent lacks (landlock: %s):\n%s%s", sb.Enforced()["landlock"], out, res.Stderr)
	}
	i := strings.LastIndex(out, "checked ")
	n := 0
	if i >= 0 {
		n, _ = strconv.Atoi(strings.TrimSpace(out[i+len("checked "):]))
	}
	if n < 3 { // the init (several threads) and the runner at least
		t.Errorf("only %d init/runner mem files found inside, the check proves nothing:\n%s%s", n, out, res.Stderr)
	}
}

// TestNoPrivilegedTaskInside: with Landlock, no task of the sandbox keeps
// a capability and none of the init's or runner's memory is writable.
func TestNoPrivilegedTaskInside(t *testing.T) {
	b := requireNative(t)
	checkPrivs(t, start(t, b, newSpec(t)))
}

// TestWithoutLandlock re-runs this test binary as a supervisor under a
// seccomp filter that makes the Landlock calls fail with ENOSYS, as a
// kernel without Landlock does (the init, the runner and the agent
// inherit it): the native backend refuses to start unless asked to run
// without Landlock by name, and then still confines every task.
func TestWithoutLandlock(t *testing.T) {
	requireNative(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNoLandlock$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "NATIVE_HELPER_NO_LANDLOCK=1", "AGENTRUN_TEST_BIN="+testsupport.Agentrun(t))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "landlock calls fail: ENOSYS") {
		t.Fatalf("without Landlock: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func TestHelperNoLandlock(t *testing.T) {
	if os.Getenv("NATIVE_HELPER_NO_LANDLOCK") != "1" {
		t.Skip("helper role only")
	}
	denyLandlock(t)
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno != unix.ENOSYS {
		t.Fatalf("landlock_create_ruleset under the filter: %v", errno)
	}
	t.Log("landlock calls fail: ENOSYS")

	b := backend(t)
	err := b.Preflight(context.Background())
	ce, ok := catalog.As(err)
	if !ok || ce.Code != catalog.SandboxPreflight.Code || !strings.Contains(err.Error(), "Landlock") || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("preflight without Landlock: %v, want a sandbox_preflight catalog error naming Landlock", err)
	}
	if sb, err := b.Start(context.Background(), newSpec(t)); err == nil {
		sb.Destroy(context.Background())
		t.Errorf("native started without Landlock and without the opt-in (Enforced: %v)", sb.Enforced())
	} else if _, ok := catalog.As(err); !ok || !strings.Contains(err.Error(), "Landlock") {
		t.Errorf("start without Landlock: %v, want a catalog error naming Landlock", err)
	}

	opt := noLandlockBackend(t)
	if err := opt.Preflight(context.Background()); err != nil {
		t.Fatalf("preflight with the opt-in: %v", err)
	}
	sb := start(t, opt, newSpec(t))
	if v := sb.Enforced()["landlock"]; !strings.HasPrefix(v, "unavailable: ") {
		t.Fatalf("Enforced[landlock] = %q without Landlock", v)
	}
	checkPrivs(t, sb)
	// A one-shot command goes through the same init.
	r := sh(t, opt, newSpec(t), `for p in /proc/1/mem /proc/1/task/*/mem; do (exec 3<>"$p") 2>/dev/null && echo "WRITABLE $p"; done
grep -h CapEff /proc/1/task/*/status | grep -v '0000000000000000$'; true`)
	if strings.Contains(r.stdout, "WRITABLE") || strings.Contains(r.stdout, "CapEff") {
		t.Errorf("one-shot command without Landlock reaches the init:\n%v", r)
	}
}

// noLandlockBackend is the backend with the explicit opt-in.
func noLandlockBackend(t testing.TB) *native.Backend {
	t.Helper()
	var ro []string
	if _, err := os.Stat("/usr/local/go"); err == nil {
		ro = append(ro, "/usr/local/go")
	}
	return native.New(native.Options{Executable: testsupport.Agentrun(t), ReadOnlyPaths: ro, AllowNoLandlock: true}).(*native.Backend)
}

// denyLandlock installs, on every thread of this process, a seccomp
// filter under which the Landlock calls fail with ENOSYS. Everything
// started from here on inherits it.
func denyLandlock(t *testing.T) {
	t.Helper()
	const (
		ldNr   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
		allow  = 0x7fff0000
		enosys = 0x00050000 | uint32(unix.ENOSYS)
	)
	f := []unix.SockFilter{
		{Code: ldNr, K: 0},
		{Code: jeq, Jt: 3, K: unix.SYS_LANDLOCK_CREATE_RULESET},
		{Code: jeq, Jt: 2, K: unix.SYS_LANDLOCK_ADD_RULE},
		{Code: jeq, Jt: 1, K: unix.SYS_LANDLOCK_RESTRICT_SELF},
		{Code: ret, K: allow},
		{Code: ret, K: enosys},
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	// no_new_privs on the calling thread (TSYNC passes it on to the
	// others): a filter needs it without CAP_SYS_ADMIN.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatalf("no_new_privs: %v", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		t.Fatalf("seccomp: %v", errno)
	}
}

// leakScript prints, from inside, what names the outside: the mount
// table, every process's command line and environment, and every
// readable region of the init's and the runner's memory.
const leakScript = `cat /proc/self/mountinfo
for p in /proc/[0-9]*; do
	tr '\0' '\n' < $p/cmdline 2>/dev/null; echo
	tr '\0' '\n' < $p/environ 2>/dev/null; echo
	readlink $p/exe $p/cwd $p/root 2>/dev/null
	ls -l $p/fd/ 2>/dev/null
done
for p in /proc/[0-9]*; do
	case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "agentrun __sandbox "*) ;; *) continue;; esac
	perl -e '
		my $p = shift;
		open(my $maps, "<", "$p/maps") or exit 0;
		open(my $mem, "<", "$p/mem") or exit 0;
		while (<$maps>) {
			my ($a, $b, $perm) = /^([0-9a-f]+)-([0-9a-f]+) (\S+)/ or next;
			next unless $perm =~ /^r/;
			seek($mem, hex($a), 0) or next;
			my $n = hex($b) - hex($a); my $buf;
			while ($n > 0 && (my $r = sysread($mem, $buf, $n > 1048576 ? 1048576 : $n))) { print $buf; $n -= $r }
		}
		print STDERR "read $p/mem\n";' $p
done`

// TestNoHostPathsInside: nothing the agent can read names where the run
// lives on the host: not the data directory, the workspace, HOME or the
// agentrun binary.
func TestNoHostPathsInside(t *testing.T) {
	b := requireNative(t)
	requirePerl(t)
	spec := newSpec(t)
	sb := start(t, b, spec)
	res := run(t, sb, leakScript)
	out := string(res.Stdout)
	if !strings.Contains(out, " /workspace ") {
		t.Fatalf("no mount table read inside:\n%s", res.Stderr)
	}
	// Known limit: a bind mount's root field in mountinfo is the source's
	// path within its filesystem, whatever the mount point; for the
	// workspace and HOME (host directories, written through) only another
	// filesystem layer (overlay, FUSE) hides it: where overlays work,
	// they are mounted so (TestNoHostPathsInsideOverlays). Those two
	// fields are blanked here, and only those: everything else must be
	// neutral.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 5 && (f[4] == native.WorkDir || f[4] == sb.HomeDir()) && strings.Contains(l, " - ") {
			f[3] = "<bind root>"
			l = strings.Join(f, " ")
		}
		lines = append(lines, l)
	}
	checkNoHostPaths(t, spec, strings.Join(lines, "\n"), res)
}

// TestNoHostPathsInsideOverlays: with an overlay workspace, HOME is an
// overlay too, and nothing at all (no mountinfo field) names a host path.
func TestNoHostPathsInsideOverlays(t *testing.T) {
	b := requireNative(t)
	requirePerl(t)
	spec := overlaySpec(t, b)
	sb := start(t, b, spec)
	res := run(t, sb, leakScript+"\necho made > $HOME/made-inside")
	out := string(res.Stdout)
	for _, mp := range []string{native.WorkDir, sb.HomeDir()} {
		if !regexp.MustCompile(`(?m)^\S+ \S+ \S+ \S+ ` + regexp.QuoteMeta(mp) + ` .* - overlay `).MatchString(out) {
			t.Errorf("%s is not an overlay inside:\n%s", mp, out[:min(len(out), 4000)])
		}
	}
	checkNoHostPaths(t, spec, out, res)
	// What the agent wrote in HOME is a plain file of the run's HOME.
	if b, err := os.ReadFile(filepath.Join(spec.Home, "made-inside")); err != nil || string(b) != "made\n" {
		t.Errorf("HOME's file on the host: %q %v", b, err)
	}
}

func checkNoHostPaths(t *testing.T, spec sandbox.Spec, out string, res *runner.ExecResult) {
	t.Helper()
	data := filepath.Dir(spec.Workspace)
	needles := map[string]string{
		"the data directory": data,
		// The test's own directory name, also where the path is shown
		// relative to its filesystem.
		"the data directory's name": filepath.Base(filepath.Dir(data)),
		"the agentrun binary":       filepath.Dir(testsupport.Agentrun(t)),
	}
	if h, err := os.UserHomeDir(); err == nil && h != "/" && h != "" {
		needles["HOME"] = h + "/"
	}
	for what, n := range needles {
		if i := strings.Index(out, n); i >= 0 {
			lo, hi := max(0, i-120), min(len(out), i+len(n)+60)
			t.Errorf("%s (%s) is visible inside: ...%q...", what, n, out[lo:hi])
		}
	}
	t.Logf("%d bytes read inside; %s", len(out), strings.TrimSpace(string(res.Stderr)))
}
