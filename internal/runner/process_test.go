package runner

import (
	"context"
	"io"
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

// runnerProc starts the real `agentrun __runner`.
func runnerProc(t *testing.T, sock, root, state string, extra ...string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	args := append([]string{"__runner", "--socket", sock, "--root", root, "--state", state}, extra...)
	cmd := exec.Command(testsupport.Agentrun(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
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
	return cmd, stdin
}

// waitExit waits for the runner process to exit cleanly after why.
func waitExit(t *testing.T, p *exec.Cmd, why string) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- p.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("runner exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("runner did not exit on %s", why)
	}
}

func waitFile(t *testing.T, p string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
	return ""
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i:]), ") Z")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunnerRestartInterrupts kills the real runner process while a
// command runs and starts a new one on the same socket and state dir: the
// command died with the runner, the client reports it interrupted, and a
// resent id is answered interrupted from the journal, never run again.
func TestRunnerRestartInterrupts(t *testing.T) {
	root, state, sock := t.TempDir(), t.TempDir(), filepath.Join(testsupport.ShortDir(t), "s")
	p1, _ := runnerProc(t, sock, root, state)
	ctx := context.Background()
	c, err := Dial(ctx, sock, DialOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type outcome struct {
		res *ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Exec(ctx, ExecRequest{Shell: "echo ran >> count; echo $$ > pid; exec sleep 100"}, nil, nil)
		done <- outcome{res, err}
	}()
	raw := rawDial(t, sock)
	rawArgs := ExecRequest{Shell: "echo ran >> count2; echo $$ > pid2; exec sleep 100"}
	raw.send("raw-1", opExec, rawArgs)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(root, "pid")))
	pid2, _ := strconv.Atoi(waitFile(t, filepath.Join(root, "pid2")))

	p1.Process.Kill()
	p1.Wait()
	waitGone(t, pid) // Pdeathsig: the command died with the runner
	waitGone(t, pid2)

	runnerProc(t, sock, root, state)
	select {
	case o := <-done:
		if !IsCode(o.err, CodeInterrupted) {
			t.Fatalf("exec across a restart: res %+v err %v, want %s", o.res, o.err, CodeInterrupted)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("exec did not return after the runner restarted")
	}
	raw2 := rawDial(t, sock)
	if raw2.hello.Instance == raw.hello.Instance {
		t.Fatal("a restarted runner kept its instance id")
	}
	raw2.send("raw-1", opExec, rawArgs)
	if _, resp := raw2.collect("raw-1"); resp.Error == nil || resp.Error.Code != CodeInterrupted {
		t.Fatalf("resent id after restart: %+v", resp)
	}
	for _, f := range []string{"count", "count2"} {
		if n := lines(t, filepath.Join(root, f)); n != 1 {
			t.Fatalf("%s: ran %d times", f, n)
		}
	}
	// The client works against the new instance.
	if _, err := c.Stat(ctx, StatRequest{Path: "count"}); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerMainEnvFileAndStdinEOF(t *testing.T) {
	root, sock := t.TempDir(), filepath.Join(testsupport.ShortDir(t), "s")
	envFile := filepath.Join(t.TempDir(), "env")
	os.WriteFile(envFile, []byte("A=1\x00PATH=/usr/bin:/bin\x00B=two words"), 0o600)
	p, stdin := runnerProc(t, sock, root, t.TempDir(), "--env-file", envFile)
	c, err := Dial(context.Background(), sock, DialOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out strings.Builder
	if _, err := c.Exec(context.Background(), ExecRequest{Argv: []string{"env"}}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if out.String() != "A=1\nPATH=/usr/bin:/bin\nB=two words\n" {
		t.Fatalf("env: %q", out.String())
	}
	// A command running when the parent goes away dies with the runner.
	go c.Exec(context.Background(), ExecRequest{Shell: "sleep 100 & echo $! > pid; wait"}, nil, nil)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(root, "pid")))
	stdin.Close()
	waitExit(t, p, "stdin EOF")
	waitGone(t, pid)
}

func TestRunnerMainSIGTERMKillsGroups(t *testing.T) {
	root, sock := t.TempDir(), filepath.Join(testsupport.ShortDir(t), "s")
	p, _ := runnerProc(t, sock, root, t.TempDir())
	c, err := Dial(context.Background(), sock, DialOptions{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Exec(context.Background(), ExecRequest{Shell: "(sleep 100; echo) & echo $! > pid; wait", KillGrace: 200 * time.Millisecond}, nil, nil)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(root, "pid")))
	p.Process.Signal(syscall.SIGTERM)
	waitExit(t, p, "SIGTERM")
	waitGone(t, pid) // a grandchild in the group: killed by group, not by Pdeathsig
}

func TestRunnerMainUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--bogus"}} {
		cmd := exec.Command(testsupport.Agentrun(t), append([]string{"__runner"}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errorsAs(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "__runner") {
			t.Errorf("%v: err %v out %q", args, err, out)
		}
	}
}

// TestRunnerKilledKillsGrandchildren kills the runner outright while a
// command's background child runs: Pdeathsig does not reach a grandchild,
// the watchdog ends its group.
func TestRunnerKilledKillsGrandchildren(t *testing.T) {
	root, sock := t.TempDir(), filepath.Join(testsupport.ShortDir(t), "s")
	p, _ := runnerProc(t, sock, root, t.TempDir())
	c, err := Dial(context.Background(), sock, DialOptions{Wait: 10 * time.Second, ReconnectTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Exec(context.Background(), ExecRequest{Shell: "sleep 100 & echo $! > pid; (sleep 100; echo) & wait"}, nil, nil)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(root, "pid")))
	p.Process.Kill()
	p.Wait()
	waitGone(t, pid)
}
