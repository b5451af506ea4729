package host_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

const helperEnv = "AGENTRUN_TEST_HOST_SUPERVISOR"

// TestHelperSupervisor is not a test: it is the supervisor process that
// TestSupervisorKilledKillsDaemons kills.
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
	sb := start(t, b, spec(t, dir))
	sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: daemonize + "touch up; sleep 300"}, nil, nil)
}

// TestSupervisorKilledKillsDaemons kills the supervisor (SIGKILL) while a
// host sandbox's command runs, after it daemonized (setsid, double fork):
// those daemons must not outlive it (the watchdog, which survives the
// supervisor, kills what holds the command's marker), also when the
// watchdog was started by an earlier sandbox of the same process.
func TestSupervisorKilledKillsDaemons(t *testing.T) {
	for name, sub := range map[string]bool{"inprocess": false, "subprocess": true} {
		t.Run(name, func(t *testing.T) {
			dir := testsupport.ShortDir(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSupervisor$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+dir)
			if sub {
				cmd.Env = append(cmd.Env, helperEnv+"_SUBPROCESS="+testsupport.Agentrun(t))
			}
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
