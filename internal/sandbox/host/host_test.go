package host_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/sandbox/sandboxtest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, host.New(), sandboxtest.Options{})
}

func TestConformanceSubprocess(t *testing.T) {
	b := host.NewWithOptions(host.Options{Subprocess: true, Executable: testsupport.Agentrun(t)})
	sandboxtest.Run(t, b, sandboxtest.Options{})
}

func BenchmarkConformance(b *testing.B) {
	sandboxtest.Bench(b, host.New(), sandboxtest.Options{})
}

func BenchmarkConformanceSubprocess(b *testing.B) {
	be := host.NewWithOptions(host.Options{Subprocess: true, Executable: testsupport.Agentrun(b)})
	sandboxtest.Bench(b, be, sandboxtest.Options{})
}

func spec(t testing.TB, dir string) sandbox.Spec {
	t.Helper()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return sandbox.Spec{
		RunID:     "r1",
		Workspace: ws,
		Home:      filepath.Join(dir, "home"),
		StateDir:  filepath.Join(dir, "state"),
		Env:       []string{"PATH=/usr/bin:/bin"},
		Network:   sandbox.NetworkNone,
	}
}

func start(t testing.TB, b sandbox.Backend, sp sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

func execOut(t *testing.T, sb sandbox.Sandbox, shell string) string {
	t.Helper()
	res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: shell}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func TestEnvironmentIsExactlyTheSpec(t *testing.T) {
	t.Setenv("AGENTRUN_TEST_TOKEN", "secret")
	dir := testsupport.ShortDir(t)
	sp := spec(t, dir)
	sb := start(t, host.New(), sp)
	res, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Argv: []string{"env"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "PATH=/usr/bin:/bin\nHOME=" + sp.Home + "\nTMPDIR=" + filepath.Join(sp.StateDir, "tmp") + "\n"
	if string(res.Stdout) != want {
		t.Fatalf("env:\n%s\nwant:\n%s", res.Stdout, want)
	}
	if got := sb.WorkDir(); got != sp.Workspace {
		t.Fatalf("WorkDir %s, want %s", got, sp.Workspace)
	}
}

func TestEnforcedClaimsNothing(t *testing.T) {
	sb := start(t, host.New(), spec(t, testsupport.ShortDir(t)))
	m := sb.Enforced()
	for _, k := range []string{"namespaces", "filesystem", "seccomp", "landlock", "network", "memory", "pids"} {
		if !strings.HasPrefix(m[k], "unavailable: host backend does not isolate") {
			t.Errorf("%s: %q", k, m[k])
		}
	}
	for k, v := range m {
		if v != "enforced" && !strings.HasPrefix(v, "unavailable: ") {
			t.Errorf("%s: %q is neither enforced nor unavailable", k, v)
		}
	}
}

func TestAllowlistBridgesToProxy(t *testing.T) {
	dir := testsupport.ShortDir(t)
	proxy := testsupport.EchoUnix(t, filepath.Join(dir, "proxy.sock"))
	sp := spec(t, dir)
	sp.Network, sp.ProxySocket = sandbox.NetworkAllowlist, proxy
	sb := start(t, host.New(), sp)
	if !strings.Contains(sb.Enforced()["network"], "cooperative") {
		t.Errorf("network: %q", sb.Enforced()["network"])
	}
	got := execOut(t, sb, `echo "$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy"`)
	f := strings.Fields(got)
	if len(f) != 4 || f[0] != f[1] || f[0] != f[2] || f[0] != f[3] || !strings.HasPrefix(f[0], "http://127.0.0.1:") {
		t.Fatalf("proxy env: %q", got)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(f[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("CONNECT example.test:443 HTTP/1.1\r\n\r\n"))
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "CONNECT" {
		t.Fatalf("relay: %q %v", buf, err)
	}
	// After Stop the bridge is gone.
	sb.Stop(context.Background())
	if c2, err := net.DialTimeout("tcp", strings.TrimPrefix(f[0], "http://"), time.Second); err == nil {
		c2.Close()
		t.Fatal("bridge still listening after Stop")
	}
}

func TestAllowlistNeedsProxySocket(t *testing.T) {
	sp := spec(t, testsupport.ShortDir(t))
	sp.Network = sandbox.NetworkAllowlist
	if _, err := host.New().Start(context.Background(), sp); err == nil {
		t.Fatal("allowlist without a proxy socket started")
	}
	if _, err := os.Stat(sp.StateDir); !os.IsNotExist(err) {
		t.Fatalf("failed start left %s", sp.StateDir)
	}
}

func testStopKills(t *testing.T, b sandbox.Backend) {
	dir := testsupport.ShortDir(t)
	sp := spec(t, dir)
	sb := start(t, b, sp)
	done := make(chan error, 1)
	go func() {
		_, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: "sleep 100 & echo $! > pid; (sleep 100; echo) & wait", KillGrace: 200 * time.Millisecond}, nil, nil)
		done <- err
	}()
	pidFile := filepath.Join(sp.Workspace, "pid")
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("no pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("exec still waiting after Stop")
	}
	for deadline := time.Now().Add(5 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d alive after Stop", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sp.StateDir); !os.IsNotExist(err) {
		t.Fatalf("state dir left: %v", err)
	}
	if _, err := os.Stat(sp.Workspace); err != nil {
		t.Fatalf("workspace removed: %v", err)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i:]), ") Z")
}

func TestStopKillsEveryGroup(t *testing.T) { testStopKills(t, host.New()) }

func TestStopKillsEveryGroupSubprocess(t *testing.T) {
	testStopKills(t, host.NewWithOptions(host.Options{Subprocess: true, Executable: testsupport.Agentrun(t)}))
}

func TestLongStateDirUsesShortSocket(t *testing.T) {
	dir := testsupport.ShortDir(t)
	sp := spec(t, dir)
	sp.StateDir = filepath.Join(dir, strings.Repeat("s", 60), strings.Repeat("t", 60), "state")
	sb := start(t, host.New(), sp)
	if got := execOut(t, sb, "echo ok"); got != "ok" {
		t.Fatalf("got %q", got)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStopBeforeUseAndDestroyTwice(t *testing.T) {
	sb := start(t, host.New(), spec(t, testsupport.ShortDir(t)))
	ctx := context.Background()
	for range 2 {
		if err := sb.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Runner().Stat(ctx, runner.StatRequest{Path: "."}); err == nil {
		t.Fatal("runner answers after Destroy")
	}
}

// BenchmarkStart measures Start+Destroy and a first round trip, serving the
// runner in-process and as a subprocess.
func BenchmarkStart(b *testing.B) {
	for _, mode := range []struct {
		name string
		b    func() sandbox.Backend
	}{
		{"inprocess", host.New},
		{"subprocess", func() sandbox.Backend {
			return host.NewWithOptions(host.Options{Subprocess: true, Executable: testsupport.Agentrun(b)})
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			be := mode.b()
			dir := testsupport.ShortDir(b)
			ctx := context.Background()
			for b.Loop() {
				sp := spec(b, dir)
				sb, err := be.Start(ctx, sp)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sb.Runner().Stat(ctx, runner.StatRequest{Path: "."}); err != nil {
					b.Fatal(err)
				}
				if err := sb.Destroy(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestSubprocessThatDiesFailsStartFast(t *testing.T) {
	sp := spec(t, testsupport.ShortDir(t))
	start := time.Now()
	_, err := host.NewWithOptions(host.Options{Subprocess: true, Executable: "/bin/false"}).Start(context.Background(), sp)
	if err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	if _, err := os.Stat(sp.StateDir); !os.IsNotExist(err) {
		t.Fatalf("failed start left %s", sp.StateDir)
	}
}
