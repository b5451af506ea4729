package e2e

import (
	"bytes"
	"cmp"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// procStat is /proc/pid/stat's fields after the command's name: [0] is
// the state, [1] the parent's pid, [19] the start time (clock ticks
// since boot, the same in every pid namespace).
func procStat(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	return statFields(string(b))
}

// warmInits are the pids of the native sandbox inits started ahead
// (agentrun __sandbox init warm) whose parent is ppid.
func warmInits(t *testing.T, ppid int) []int {
	t.Helper()
	return procsWhere(t, func(proc string, args []string) bool {
		if !slices.Equal(args, []string{"agentrun", "__sandbox", "init", warmstart.RoleWarm}) {
			return false
		}
		f := procStat(strings.TrimPrefix(proc, "/proc/"))
		return len(f) > 1 && f[1] == strconv.Itoa(ppid)
	})
}

// awaitWarmInit waits for the one init started ahead whose parent is
// ppid, and returns its pid.
func awaitWarmInit(t *testing.T, ppid int, what string) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		switch pids := warmInits(t, ppid); len(pids) {
		case 0:
		case 1:
			return pids[0]
		default:
			t.Fatalf("%s started %d inits ahead: %v", what, len(pids), pids)
		}
	}
	t.Fatalf("%s (pid %d) started no sandbox init", what, ppid)
	return 0
}

// startPendingSupervisor starts `agentrun __supervise --pending` for e's
// data directory with args added, as package ahead does, and returns it
// and our end of its socket.
func startPendingSupervisor(t *testing.T, e *env, args ...string) (*exec.Cmd, *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer theirs.Close()
	cmd := exec.Command(e.bin, append([]string{"__supervise", "--home", e.home, "--pending"}, args...)...)
	cmd.Env = e.vars
	cmd.ExtraFiles = []*os.File{theirs}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ours.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the supervisor's output:\n%s", out.String())
		}
	})
	return cmd, ours
}

// TestWarmInitFromSupervisorInitializer: a supervisor started ahead with
// warmstart.Flag starts the native sandbox's init from its initializer,
// before it is told anything, in namespaces of its own. Told that the run
// uses another backend, it ends that init and goes on waiting; told
// native, it keeps it; and when no run comes (the socket closes) it exits
// and takes the init along.
func TestWarmInitFromSupervisorInitializer(t *testing.T) {
	for _, c := range []struct {
		backend string
		kept    bool
	}{{"host", false}, {"", false}, {"native", true}} {
		t.Run(cmp.Or(c.backend, "none"), func(t *testing.T) {
			e := newEnv(t)
			sup, conn := startPendingSupervisor(t, e, warmstart.Flag)
			init := awaitWarmInit(t, sup.Process.Pid, "the supervisor's initializer")
			ns := func(pid string) string {
				l, err := os.Readlink("/proc/" + pid + "/ns/pid")
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			if ns(strconv.Itoa(init)) == ns("self") {
				t.Fatalf("the init started ahead (pid %d) is in the host's pid namespace", init)
			}
			if _, err := io.WriteString(conn, c.backend+"\n"); err != nil {
				t.Fatal(err)
			}
			if c.kept {
				time.Sleep(300 * time.Millisecond)
				if pids := warmInits(t, sup.Process.Pid); len(pids) != 1 || pids[0] != init {
					t.Fatalf("told %q, the supervisor has inits %v, want the one started ahead (%d)", c.backend, pids, init)
				}
			} else {
				exited(t, init, "the init started ahead for a run of another backend")
				if !alive(sup.Process.Pid) {
					t.Fatal("the supervisor exited instead of waiting for its run")
				}
			}
			conn.Close() // no run comes
			done := make(chan error, 1)
			go func() { done <- sup.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the supervisor, no run given: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the supervisor did not exit when no run came")
			}
			exited(t, init, "the init started ahead, once its supervisor exited")
		})
	}
}

// TestRunTakesWarmInitFromSupervisorInitializer: a Lite submit that names
// no backend (native, the default) gets a supervisor that started the
// sandbox's init from its initializer, while the submit still reads its
// configuration (a FIFO the test holds shut: nothing has told the
// supervisor the backend yet), and the run's sandbox is that init: its
// pid 1, as the agent sees it, started when the init the test saw did.
func TestRunTakesWarmInitFromSupervisorInitializer(t *testing.T) {
	e := newEnv(t)
	cfg := configFIFO(t, e)
	var out bytes.Buffer
	cmd := exec.Command(e.bin, "submit", "--json", "--network", "none", "--agent-cmd", "cat /proc/1/stat > stat.txt", "--wait", "write the init's stat")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.repo, e.vars, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sup := awaitPendingSupervisor(t, e, &out)
	init := awaitWarmInit(t, sup, "the supervisor started ahead (not yet told the backend)")
	stat := procStat(strconv.Itoa(init))
	if len(stat) < 20 {
		t.Fatalf("the init's stat: %v", stat)
	}
	defer serveEmpty(cfg)() // each read of the configuration finds it empty
	if err := cmd.Wait(); err != nil {
		if strings.Contains(out.String(), "sandbox_preflight") {
			requireCaps(t, "the native sandbox", false, out.String())
		}
		t.Fatalf("submit: %v\n%s", err, out.String())
	}
	id := between(out.String(), `"id": "`, `"`)
	r := e.get(id)
	if r.State != run.StateSucceeded || r.Branch == "" || r.Sandbox.Backend != "native" {
		t.Fatalf("run %s: %s on %q: %s", id, r.State, r.Sandbox.Backend, r.Message)
	}
	inside := statFields(testsupport.Git(t, e.repo, "show", r.Branch+":stat.txt"))
	if len(inside) < 20 || inside[19] != stat[19] {
		t.Fatalf("the sandbox's pid 1 started at tick %v, the init the supervisor's initializer started at %s: not the same process", inside, stat[19])
	}
}
