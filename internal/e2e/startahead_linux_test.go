package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// procsWhere are the pids of the processes whose command line args and
// /proc entry (e.g. "/proc/123") match says.
func procsWhere(t *testing.T, match func(proc string, args []string) bool) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(filepath.Join("/proc", e.Name()), strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pendingSupervisors are the pids of supervisors started ahead for data
// directory home that wait for their run (agentrun __supervise --pending).
func pendingSupervisors(t *testing.T, home string) []int {
	t.Helper()
	return procsWhere(t, func(_ string, args []string) bool {
		return len(args) >= 5 && args[1] == "__supervise" && args[3] == home && args[4] == "--pending"
	})
}

// awaitPendingSupervisor waits for the one supervisor started ahead for
// e's data directory (by a submit whose output is out) and returns its
// pid.
func awaitPendingSupervisor(t *testing.T, e *env, out *bytes.Buffer) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pids := pendingSupervisors(t, e.home); len(pids) == 1 {
			return pids[0]
		}
	}
	t.Fatalf("no supervisor started ahead for %s\n%s", e.home, out.String())
	return 0
}

// configFIFO makes e's configuration file a FIFO, which holds a submit
// that reads it until serveEmpty.
func configFIFO(t *testing.T, e *env) string {
	t.Helper()
	cfg := filepath.Join(e.root, "config", "agentrun", "config.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serveEmpty lets each read of FIFO cfg find it empty, until stop.
func serveEmpty(cfg string) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if w, err := os.OpenFile(cfg, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { close(done) }
}

// startBlockedSubmit starts a submit whose task comes on stdin, which the
// test holds open: the submit has started its supervisor ahead and waits
// for the task. It returns the command, the task's writer and the pending
// supervisor's pid.
func startBlockedSubmit(t *testing.T, e *env, out *bytes.Buffer) (*exec.Cmd, io.WriteCloser, int) {
	t.Helper()
	cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "--wait", "-")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.repo, e.vars, out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stdin, awaitPendingSupervisor(t, e, out)
}

// exited waits for pid, not our child, to exit.
func exited(t *testing.T, pid int, what string) {
	t.Helper()
	if !waitGone(pid) {
		t.Fatalf("%s (pid %d) did not exit", what, pid)
	}
}

// TestStartAheadKilledSubmitLeavesNothing: a submit killed with SIGKILL
// after starting its supervisor ahead, before the run exists: the waiting
// supervisor exits, and no run, log or lock is left in the data directory.
func TestStartAheadKilledSubmitLeavesNothing(t *testing.T) {
	e := newEnv(t)
	var out bytes.Buffer
	cmd, _, pid := startBlockedSubmit(t, e, &out)
	before := listTree(t, e.home)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	exited(t, pid, "the supervisor started ahead")
	if ids := e.runIDs(); len(ids) != 0 {
		t.Fatalf("runs left: %v", ids)
	}
	if after := listTree(t, e.home); after != before {
		t.Fatalf("the data directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestStartAheadRefusedSubmit: a submit refused after its supervisor was
// started ahead (an empty task) exits with the refusal; the supervisor
// exits too, and nothing is made.
func TestStartAheadRefusedSubmit(t *testing.T) {
	e := newEnv(t)
	var out bytes.Buffer
	cmd, stdin, pid := startBlockedSubmit(t, e, &out)
	stdin.Close() // an empty task
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out.String(), `"code": "empty_task"`) {
		t.Fatalf("submit of an empty task: %v\n%s", err, out.String())
	}
	exited(t, pid, "the supervisor started ahead")
	if ids := e.runIDs(); len(ids) != 0 {
		t.Fatalf("runs left: %v", ids)
	}
}

// TestStartAheadGoneFallsBack: the supervisor started ahead is killed
// before the run exists; the submit spawns one as before, and the run
// succeeds with its branch.
func TestStartAheadGoneFallsBack(t *testing.T) {
	e := newEnv(t)
	var out bytes.Buffer
	cmd, stdin, pid := startBlockedSubmit(t, e, &out)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exited(t, pid, "the supervisor started ahead")
	if _, err := io.WriteString(stdin, "write x"); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("submit: %v\n%s", err, out.String())
	}
	id := between(out.String(), `"id": "`, `"`)
	if r := e.get(id); r.State != run.StateSucceeded || r.Branch == "" {
		t.Fatalf("run %s ended %s: %s", id, r.State, r.Message)
	}
}

// listTree lists what is under dir, one path per line ("" when dir does
// not exist).
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		b.WriteString(p + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStartAheadFromTheInitializer: a Lite submit's supervisor is started
// by the binary's initializer (package ahead), before the submit has read
// its configuration (here a FIFO the test holds shut), and that process is
// the one that runs the run.
func TestStartAheadFromTheInitializer(t *testing.T) {
	e := newEnv(t)
	cfg := configFIFO(t, e)
	var out bytes.Buffer
	cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "host", "--agent-cmd", "sleep 2; echo x > x.txt", "write x")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.repo, e.vars, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := awaitPendingSupervisor(t, e, &out) // while the submit reads its configuration
	stop := serveEmpty(cfg)                   // each read of it finds it empty
	err := cmd.Wait()
	stop()
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, out.String())
	}
	id := between(out.String(), `"id": "`, `"`)
	r := e.waitFor(id, "its supervisor", func(r *run.Run) bool { return r.Supervisor != nil || r.State.Terminal() })
	if r.Supervisor == nil || r.Supervisor.PID != pid {
		t.Fatalf("the run's supervisor is %+v (run %s), not pid %d, which the submit's initializer started", r.Supervisor, r.State, pid)
	}
	if r := e.waitFor(id, "its end", func(r *run.Run) bool { return r.State.Terminal() }); r.State != run.StateSucceeded {
		t.Fatalf("run %s ended %s: %s", id, r.State, r.Message)
	}
}

// TestStartHooksInitializeFirst: the initializers that start a submit's
// supervisor (package ahead), a supervisor's sandbox init (package
// warmstart) and make the heap resident (package prefault) run right
// after package os's, before the libraries': each
// runs before the 40th initializer and before distribution/reference's,
// prometheus's and net/http's.
func TestStartHooksInitializeFirst(t *testing.T) {
	cmd := exec.Command(testsupport.Agentrun(t), "version")
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("version: %v\n%s", err, stderr.String())
	}
	at := map[string]int{}
	n := 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "init" {
			n++
			at[f[1]] = n
		}
	}
	later := []string{"github.com/distribution/reference", "github.com/prometheus/client_golang/prometheus", "net/http"}
	for _, hook := range []string{"github.com/agentrun/agentrun/internal/supervisor/ahead", "github.com/agentrun/agentrun/internal/prefault", "github.com/agentrun/agentrun/internal/sandbox/native/warmstart"} {
		if at[hook] == 0 || at[hook] >= 40 {
			t.Errorf("%s initialized %d of %d (0: not at all), want among the first 40", hook, at[hook], n)
		}
		for _, l := range later {
			if at[l] != 0 && at[l] < at[hook] {
				t.Errorf("%s initialized before %s", l, hook)
			}
		}
		if t.Failed() {
			t.Log(stderr.String())
		}
	}
}
