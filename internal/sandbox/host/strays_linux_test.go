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
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// daemonize starts one process that leaves the group with setsid and one
// that double-forks, writes their pids to d1 and d2, and waits until both
// are written.
const daemonize = `setsid sh -c 'sleep 300 & echo $! > d1' </dev/null >/dev/null 2>&1 & ` +
	`(sh -c 'sleep 300 & echo $! > d2' </dev/null >/dev/null 2>&1 &); ` +
	`while [ ! -s d1 ] || [ ! -s d2 ]; do sleep 0.01; done; `

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for _, n := range []string{"d1", "d2"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// exists reports whether pid exists at all, zombie or not.
func exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func backends(t *testing.T) map[string]func() sandbox.Backend {
	return map[string]func() sandbox.Backend{
		"inprocess": host.New,
		"subprocess": func() sandbox.Backend {
			return host.NewWithOptions(host.Options{Subprocess: true, Executable: testsupport.Agentrun(t)})
		},
	}
}

// TestDaemonsDieWithTheirExec: processes a command daemonizes (setsid,
// double fork) are gone, reaped, when Exec returns, whether the command
// exits, times out or is cancelled.
func TestDaemonsDieWithTheirExec(t *testing.T) {
	for name, nb := range backends(t) {
		t.Run(name, func(t *testing.T) {
			sp := spec(t, testsupport.ShortDir(t))
			sb := start(t, nb(), sp)
			cases := []struct {
				name   string
				shell  string
				ctx    time.Duration
				req    time.Duration
				expect func(*runner.ExecResult) bool
			}{
				{"exits", daemonize + "true", 0, 0, func(r *runner.ExecResult) bool { return r.ExitCode == 0 }},
				{"times out", daemonize + "sleep 300", 0, 500 * time.Millisecond, func(r *runner.ExecResult) bool { return r.TimedOut }},
				{"cancelled", daemonize + "sleep 300", 500 * time.Millisecond, 0, func(r *runner.ExecResult) bool { return r.Cancelled }},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					os.Remove(filepath.Join(sp.Workspace, "d1"))
					os.Remove(filepath.Join(sp.Workspace, "d2"))
					ctx := context.Background()
					if c.ctx > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, c.ctx)
						defer cancel()
					}
					res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: c.shell, Timeout: c.req, KillGrace: 100 * time.Millisecond}, nil, nil)
					if c.name == "cancelled" && err != nil {
						// The client may report the cancellation itself.
					} else if err != nil {
						t.Fatal(err)
					} else if !c.expect(res) {
						t.Fatalf("result %+v", res)
					}
					pids := readPids(t, sp.Workspace)
					if c.name == "cancelled" && err != nil {
						waitGone(t, pids) // the server ends the command after replying
						return
					}
					for _, pid := range pids {
						if exists(pid) {
							t.Errorf("pid %d outlived its Exec", pid)
						}
					}
				})
			}
		})
	}
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for exists(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still exists", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestStopKillsDaemons: daemons of a command still running when Stop comes
// are gone once Stop returns.
func TestStopKillsDaemons(t *testing.T) {
	for name, nb := range backends(t) {
		t.Run(name, func(t *testing.T) {
			sp := spec(t, testsupport.ShortDir(t))
			sb := start(t, nb(), sp)
			done := make(chan error, 1)
			go func() {
				_, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: daemonize + "touch up; sleep 300", KillGrace: 100 * time.Millisecond}, nil, nil)
				done <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(sp.Workspace, "up")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("command never came up")
				}
			}
			pids := readPids(t, sp.Workspace)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := sb.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			for _, pid := range pids {
				if exists(pid) {
					t.Errorf("pid %d outlived Stop", pid)
				}
			}
			<-done
		})
	}
}

// TestBystandersUntouched: the runner's cleanup never signals nor reaps a
// process the sandbox did not start: a live git child of this process
// (whose Wait must still succeed), and a daemon that another child of this
// process left behind (re-parented to this process, a subreaper now).
func TestBystandersUntouched(t *testing.T) {
	sp := spec(t, testsupport.ShortDir(t))
	sb := start(t, host.New(), sp)
	// While a command runs, this process is a subreaper.
	done := make(chan error, 1)
	go func() {
		_, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: daemonize + "touch up; sleep 1"}, nil, nil)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(sp.Workspace, "up")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command never came up")
		}
	}
	pids := readPids(t, sp.Workspace)

	repo, _ := testsupport.Repo(t, nil)
	gitCmd := testsupport.GitCmd(t, repo, "cat-file", "--batch")
	stdin, err := gitCmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gitCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer gitCmd.Process.Kill()
	other := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "+other).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	otherPid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	defer func() {
		syscall.Kill(otherPid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(otherPid, &ws, 0, nil) // re-parented to us: ours to reap
	}()

	if ppid := parentOf(otherPid); ppid != os.Getpid() {
		t.Logf("the other daemon went to pid %d, not to this process", ppid)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if exists(pid) {
			t.Errorf("pid %d outlived its Exec", pid)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !alive(otherPid) {
		t.Fatalf("a daemon the sandbox did not start (pid %d) was killed", otherPid)
	}
	if !alive(gitCmd.Process.Pid) {
		t.Fatal("a git child of the supervisor was killed")
	}
	stdin.Close()
	if err := gitCmd.Wait(); err != nil {
		t.Fatalf("git wait after the sandbox's cleanup: %v", err)
	}
}

func parentOf(pid int) int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
