package runner

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// requireCap skips a test that needs what this machine may not offer, or
// fails it where AGENTRUN_REQUIRE_CAPS=1.
func requireCap(t *testing.T, ok bool, why string) {
	t.Helper()
	testsupport.Require(t, "a capability", ok, "%s", why)
}

// TestRunnerKilledWithoutShell runs the real runner where /bin/sh cannot
// run (a private mount namespace with an empty file bound over it, as in an
// image without a shell) and kills it outright (SIGKILL) while a command's
// background child runs: Pdeathsig does not reach the grandchild, the
// watchdog must, and it needs no shell.
func TestRunnerKilledWithoutShell(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	requireCap(t, err == nil, "needs unshare(1) for a mount namespace without /bin/sh")
	bash, err := exec.LookPath("bash")
	requireCap(t, err == nil, "needs bash for the command (sh is masked)")
	bin := testsupport.Agentrun(t)
	nosh := filepath.Join(t.TempDir(), "nosh")
	if err := os.WriteFile(nosh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-m"}
	if os.Geteuid() != 0 {
		args = []string{"-r", "-m"} // a user namespace for the mount
	}
	probe := exec.Command(unshare, append(args, bash, "-c", `mount --bind "$1" /bin/sh && ! /bin/sh -c true 2>/dev/null`, "x", nosh)...)
	out, err := probe.CombinedOutput()
	requireCap(t, err == nil, "cannot mask /bin/sh in a mount namespace: "+strings.TrimSpace(string(out)))

	root, sock := t.TempDir(), filepath.Join(testsupport.ShortDir(t), "s")
	cmd := exec.Command(unshare, append(args, bash, "-c", `mount --bind "$1" /bin/sh && shift && exec "$@"`, "x", nosh,
		bin, "__runner", "--socket", sock, "--root", root, "--state", t.TempDir())...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if s := stderr.String(); s != "" {
			t.Logf("runner stderr: %s", s)
		}
	})
	c, err := Dial(context.Background(), sock, DialOptions{Wait: 10 * time.Second, ReconnectTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(context.Background(), ExecRequest{Argv: []string{"/bin/sh", "-c", "true"}}, nil, nil); !IsCode(err, CodeExec) {
		t.Fatalf("/bin/sh runs inside the runner's namespace (err %v): the test proves nothing", err)
	}
	go c.Exec(context.Background(), ExecRequest{Argv: []string{bash, "-c", "sleep 100 & echo $! > pid; (sleep 100; echo) & wait"}}, nil, nil)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(root, "pid")))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	cmd.Process.Kill()
	cmd.Wait()
	waitGone(t, pid)
}

// TestWatchdogSharedByServers: the servers of one process share one
// watchdog process, which outlives a server that closes, so the next
// server's commands start without another.
func TestWatchdogSharedByServers(t *testing.T) {
	watchdogPid := func() int {
		processWatchdog.mu.Lock()
		defer processWatchdog.mu.Unlock()
		if processWatchdog.cmd == nil {
			return 0
		}
		return processWatchdog.cmd.Process.Pid
	}
	run := func(c Client) {
		t.Helper()
		if res, err := c.Exec(context.Background(), ExecRequest{Shell: "true"}, nil, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %v %+v", err, res)
		}
	}
	first := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ln, sock := listenTemp(t)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, ServerOptions{Root: first, Env: []string{"PATH=" + os.Getenv("PATH")}}) }()
	c := testClient(t, sock)
	run(c)
	pid := watchdogPid()
	if pid == 0 {
		t.Fatal("no watchdog after a command")
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the watchdog (pid %d) ended with the first server: %v", pid, err)
	}
	run(testClient(t, testServer(t, t.TempDir(), ServerOptions{})))
	if got := watchdogPid(); got != pid {
		t.Errorf("the next server's command has watchdog %d, want the running %d", got, pid)
	}
}

// listenTemp listens on a unix socket in a directory of its own.
func listenTemp(t *testing.T) (net.Listener, string) {
	t.Helper()
	sock := filepath.Join(testsupport.ShortDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return ln, sock
}

// TestWatchdogCoversCommandBeforeItsGroup: the runner dies (for its
// watchdog: the pipe ends) after a command started but before the
// command's group was reported: the marker the watchdog was told of
// before the start still ends the command's background child. Without
// it the child outlived the runner (seen as a rare failure of
// TestRunnerKilledKillsGrandchildren on a loaded machine).
func TestWatchdogCoversCommandBeforeItsGroup(t *testing.T) {
	root := t.TempDir()
	wd := &watchdog{}
	t.Cleanup(func() {
		wd.mu.Lock()
		wd.stopLocked()
		wd.mu.Unlock()
	})
	pid := 0
	s, err := newServer(ServerOptions{Root: root, Env: []string{"PATH=" + os.Getenv("PATH")},
		StartCmd: func(cmd *exec.Cmd) error {
			if err := startCmd(cmd); err != nil {
				return err
			}
			pid, _ = strconv.Atoi(waitFile(t, filepath.Join(root, "pid")))
			wd.mu.Lock()
			wd.w.Close() // the runner's death, as the watchdog sees it
			wd.mu.Unlock()
			waitGone(t, pid)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.watchdog = wd
	defer s.close()
	if _, err := s.exec(context.Background(), newExecution("early", "exec"), &ExecRequest{Shell: "sleep 100 & echo $! > pid; wait"}); err != nil {
		t.Fatal(err)
	}
	if pid == 0 {
		t.Fatal("the command never started")
	}
}
