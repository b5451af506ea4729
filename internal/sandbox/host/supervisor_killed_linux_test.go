package host_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

const helperEnv = "AGENTRUN_TEST_HOST_SUPERVISOR"

// TestHelperSupervisor is not a test: it is the supervisor process that
// TestSupervisorKilledKillsDaemons and TestKilledSupervisorsSocketDirGoes
// kill.
func TestHelperSupervisor(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process of TestSupervisorKilledKillsDaemons")
	}
	b := host.New()
	if os.Getenv(helperEnv+"_SUBPROCESS") != "" {
		b = host.NewWithOptions(host.Options{Subprocess: true, Executable: os.Getenv(helperEnv + "_SUBPROCESS")})
	}
	// A sandbox that ran a command and is gone first: the watchdog its
	// command started (one per process) covers the next sandbox's too.
	earlier := start(t, b, spec(t, filepath.Join(dir, "earlier")))
	if res, err := earlier.Runner().Exec(context.Background(), runner.ExecRequest{Shell: "true"}, nil, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if err := earlier.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	sp := spec(t, dir)
	if os.Getenv(helperEnv+"_LONG") != "" {
		sp.StateDir = longStateDir(dir)
	}
	sb := start(t, b, sp)
	sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: daemonize + "touch up; sleep 300"}, nil, nil)
}

// helperSupervisor starts TestHelperSupervisor in dir, with env added,
// and waits for its sandbox's command to be up: the helper and the
// command's daemons (killed when the test ends).
func helperSupervisor(t *testing.T, dir string, env ...string) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSupervisor$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+dir), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ws := spec(t, dir).Workspace
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "up")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("command never came up")
		}
	}
	pids := readPids(t, ws)
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd, pids
}

// TestSupervisorKilledKillsDaemons kills the supervisor (SIGKILL) while a
// host sandbox's command runs, after it daemonized (setsid, double fork):
// those daemons must not outlive it (the watchdog, which survives the
// supervisor, kills what holds the command's marker), also when the
// watchdog was started by an earlier sandbox of the same process.
func TestSupervisorKilledKillsDaemons(t *testing.T) {
	for name, sub := range map[string]bool{"inprocess": false, "subprocess": true} {
		t.Run(name, func(t *testing.T) {
			var env []string
			if sub {
				env = append(env, helperEnv+"_SUBPROCESS="+testsupport.Agentrun(t))
			}
			cmd, pids := helperSupervisor(t, testsupport.ShortDir(t), env...)
			cmd.Process.Kill()
			cmd.Wait()
			// Re-parented to init, which reaps them in its own time: dead
			// (a zombie) is enough.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if !alive(pids[0]) && !alive(pids[1]) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("daemons %v outlived the supervisor", pids)
				}
			}
		})
	}
}

// longStateDir is a state directory under dir too long to hold the
// runner's socket.
func longStateDir(dir string) string {
	return filepath.Join(dir, strings.Repeat("s", 60), strings.Repeat("t", 60), "state")
}

// A supervisor killed (SIGKILL) before its sandbox's Destroy leaves the
// directory that held the runner's socket (its state directory's path
// being too long for one) in the temporary directory; the next host
// sandbox's start removes it, and leaves a live one's alone.
func TestKilledSupervisorsSocketDirGoes(t *testing.T) {
	tmp := testsupport.ShortDir(t)
	t.Setenv("TMPDIR", tmp)
	cmd, _ := helperSupervisor(t, testsupport.ShortDir(t), helperEnv+"_LONG=1")
	socks := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "agentrun-sock-*"))
		return m
	}
	killed := socks()
	if len(killed) != 1 || !strings.HasPrefix(filepath.Base(killed[0]), "agentrun-sock-"+strconv.Itoa(cmd.Process.Pid)+"-") {
		t.Fatalf("the helper's socket directory: %v", killed)
	}
	// A live process's: stays.
	live, err := os.MkdirTemp(tmp, "agentrun-sock-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	other := testsupport.ShortDir(t)
	sp := spec(t, other)
	sp.StateDir = longStateDir(other)
	sb := start(t, host.New(), sp)
	if _, err := os.Stat(killed[0]); !os.IsNotExist(err) {
		t.Fatalf("the killed supervisor's socket directory stayed: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live process's went: %v", err)
	}
	if got := socks(); len(got) != 2 {
		t.Fatalf("socket directories while the sandbox runs: %v", got)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := socks(); len(got) != 1 || got[0] != live {
		t.Fatalf("socket directories after Destroy: %v", got)
	}
}
