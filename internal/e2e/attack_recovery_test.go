package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// Recovery, cancel and concurrency attacks against the real binary: kill -9
// of the supervisor in every phase, cancel and clean at awkward moments,
// racing resumes and submits, processes that try to outlive their run.
// waitGone waits until pid no longer exists, and says whether it is gone:
// seen gone twice in a row, 10 ms apart, since one look at a process that
// a kill is tearing down (its threads exiting one by one) can miss it.
func waitGone(pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for gone := 0; gone < 2; {
		if alive(pid) {
			gone = 0
		} else {
			gone++
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// leftovers lists processes whose cwd or root is inside dir, and mounts
// under it.
func leftovers(dir string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		for _, l := range []string{"cwd", "root"} {
			if target, err := os.Readlink("/proc/" + p.Name() + "/" + l); err == nil && strings.HasPrefix(target, dir) {
				out = append(out, "pid "+p.Name()+" "+l+"="+target+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
		// A process inside a sandbox sees the run's directories as its
		// mounts (binds); its cwd and root are sandbox paths. Where the
		// workspace and HOME are overlays its mount table names no host
		// path, but it is in the run's cgroups (as root).
		if mi, err := os.ReadFile("/proc/" + p.Name() + "/mountinfo"); err == nil && p.Name() != strconv.Itoa(os.Getpid()) &&
			strings.Contains(string(mi), dir+"/") {
			out = append(out, "pid "+p.Name()+" has the run's mounts: "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
		if cg, err := os.ReadFile("/proc/" + p.Name() + "/cgroup"); err == nil && strings.Contains(string(cg), "/agentrun-"+filepath.Base(dir)+"-") {
			out = append(out, "pid "+p.Name()+" is in the run's cgroups: "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, dir) {
			out = append(out, "mount "+line)
		}
	}
	return out
}

// manyFiles makes 1,500 files of random bytes (30 MB): an export that
// takes a moment.
const manyFiles = "head -c 30000000 /dev/urandom | split -a 4 -b 20000 - f"

// manyFilesBusybox is manyFiles with busybox's tools (no split): random
// bytes as base64 lines, 263 lines (20 kB) a file, in three processes (a
// head per file took over 30 s on a slow machine).
const manyFilesBusybox = `head -c 22500000 /dev/urandom | base64 | awk '{ f = "f" int((NR-1)/263); if (f != cur) { if (cur != "") close(cur); cur = f }; print > f }'`

// TestAttackKill9InEveryPhase kills the supervisor in each phase; the run
// is interrupted, resumes to exactly one commit on the base, and leaves no
// process or mount behind.
func TestAttackKill9InEveryPhase(t *testing.T) {
	for _, tc := range []struct{ phase, backend string }{
		{"preparing", "native"}, {"running", "native"}, {"checking", "native"}, {"exporting", "native"},
		{"running", "host"}, {"checking", "host"},
		// The container outlives its supervisor: the list that marks the
		// run interrupted removes it.
		{"preparing", "docker"}, {"running", "docker"}, {"checking", "docker"}, {"exporting", "docker"},
	} {
		phase, backend := tc.phase, tc.backend
		t.Run(phase+"/"+backend, func(t *testing.T) {
			e := newEnv(t)
			args := []string{}
			agent := "echo work > work.txt"
			check := "true"
			var pred func(*run.Run) bool
			switch phase {
			case "preparing":
				// A repository large enough that preparing takes a moment.
				for i := 0; i < 3000; i++ {
					p := filepath.Join(e.repo, "tree", strconv.Itoa(i%50), strconv.Itoa(i)+".txt")
					_ = os.MkdirAll(filepath.Dir(p), 0o755)
					_ = os.WriteFile(p, []byte(strings.Repeat("x", 2000)+strconv.Itoa(i)), 0o644)
				}
				testsupport.Git(t, e.repo, "add", "-A")
				testsupport.Git(t, e.repo, "commit", "-q", "-m", "big")
				pred = func(r *run.Run) bool { return r.State == run.StatePreparing && r.Supervisor != nil }
			case "running":
				agent = "echo work > work.txt; [ -f .resumed ] || { touch .resumed; sleep 300; }"
				pred = func(r *run.Run) bool {
					return r.State == run.StateRunning && r.Supervisor != nil && fileExists(filepath.Join(e.home, "runs", r.ID, "workspace", ".resumed"))
				}
			case "checking":
				check = "[ -f .checked ] || { touch .checked; sleep 300; }"
				pred = func(r *run.Run) bool {
					return r.Supervisor != nil && fileExists(filepath.Join(e.home, "runs", r.ID, "workspace", ".checked"))
				}
			case "exporting":
				agent = manyFiles
				if backend == "docker" {
					agent = manyFilesBusybox // the test image has no split
				}
				args = append(args, "--max-files", "5000", "--max-bytes", "209715200")
				pred = func(r *run.Run) bool { return r.State == run.StateExporting && r.Supervisor != nil }
			}
			d, res := e.submitOn(backend, nil, append(args, "--agent-cmd", agent, "--check", "c="+check, "kill me")...)
			must(t, res, 0)
			r := e.waitFor(d.ID, phase, pred)
			runDir := filepath.Join(e.home, "runs", d.ID)
			if (phase == "running" || phase == "checking") && len(leftovers(runDir)) == 0 {
				t.Fatal("control: the live sandbox is not seen")
			}
			if err := syscall.Kill(r.Supervisor.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitGone(r.Supervisor.PID)
			res = e.run("list", "--json")
			must(t, res, 0)
			// A process the supervisor was forking when it died can hold a
			// copy of its lock for a moment; the run must still be marked
			// interrupted within seconds. Say who held it if it was not.
			for i := 0; i < 30 && e.get(d.ID).State.Active(); i++ {
				if i == 0 {
					locks, _ := os.ReadFile("/proc/locks")
					t.Logf("run still %s right after the kill; /proc/locks:\n%s", e.get(d.ID).State, locks)
				}
				time.Sleep(100 * time.Millisecond)
				res = e.run("list", "--json")
			}
			if r := e.get(d.ID); r.State != run.StateInterrupted {
				if r.State == run.StateSucceeded && phase == "exporting" {
					t.Skip("the export finished before the kill")
				}
				t.Fatalf("after kill -9 in %s: %s/%s\n%s", phase, r.State, r.Reason, res.stdout)
			}
			// The sandbox dies with its supervisor.
			deadline := time.Now().Add(10 * time.Second)
			for len(leftovers(runDir)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if l := leftovers(runDir); len(l) > 0 {
				t.Errorf("left behind after kill -9 in %s:\n%s", phase, strings.Join(l, "\n"))
			}
			// No half-written branch.
			if out := testsupport.Git(t, e.repo, "branch", "--list", d.Branch); out != "" {
				if n := testsupport.Git(t, e.repo, "rev-list", "--count", "main.."+d.Branch); n != "1" {
					t.Errorf("branch half-written: %s commits", n)
				}
			}
			res = e.run("resume", "--wait", "--json", d.ID)
			if res.code != 0 {
				ev := e.run("logs", "--events", d.ID)
				t.Fatalf("resume after kill -9 in %s: exit %d\n%s\nevents:\n%s\nsupervisor log:\n%s", phase, res.code, res.stdout, ev.stdout, e.supervisorLog(d.ID))
			}
			r = e.get(d.ID)
			if r.State != run.StateSucceeded {
				t.Fatalf("after resume: %s %s", r.State, r.Message)
			}
			if n := testsupport.Git(t, e.repo, "rev-list", "--count", "main.."+d.Branch); n != "1" {
				t.Fatalf("branch has %s commits on base", n)
			}
			if parent := testsupport.Git(t, e.repo, "rev-parse", d.Branch+"^"); parent != testsupport.Git(t, e.repo, "rev-parse", "main") {
				t.Fatalf("branch parent %s", parent)
			}
			if l := leftovers(runDir); len(l) > 0 {
				t.Errorf("left behind after resume:\n%s", strings.Join(l, "\n"))
			}
		})
	}
}

// TestAttackCancelAndClean: cancel while checking and exporting, cancel
// twice, clean while running.
func TestAttackCancelAndClean(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitOn("native", nil, "--agent-cmd", "echo x > x.txt", "--check", "slow=touch .checking; sleep 300", "t")
	must(t, res, 0)
	e.waitFor(d.ID, "the check", func(r *run.Run) bool {
		return fileExists(filepath.Join(e.home, "runs", d.ID, "workspace", ".checking"))
	})
	res = e.run("clean", "--json", d.ID)
	if res.code == 0 || !fileExists(filepath.Join(e.home, "runs", d.ID, "run.json")) {
		t.Fatalf("clean of a running run: exit %d %s", res.code, res.stdout)
	}
	res = e.run("clean", "--force", "--json", d.ID)
	if res.code == 0 || !fileExists(filepath.Join(e.home, "runs", d.ID, "run.json")) {
		t.Fatalf("clean --force of a running run: exit %d %s", res.code, res.stdout)
	}
	must(t, e.run("cancel", d.ID), 0)
	res = e.run("cancel", "--json", d.ID)
	if res.code != 0 && !strings.Contains(res.stdout, `"error"`) {
		t.Fatalf("second cancel: %d %s", res.code, res.stdout)
	}
	r := e.waitFor(d.ID, "cancelled", func(r *run.Run) bool { return r.State.Terminal() })
	if r.State != run.StateCancelled {
		t.Fatalf("state %s", r.State)
	}
	if out := testsupport.Git(t, e.repo, "branch", "--list", d.Branch); out != "" {
		t.Fatalf("a cancelled run wrote its branch")
	}
	if l := leftovers(filepath.Join(e.home, "runs", d.ID)); len(l) > 0 {
		deadline := time.Now().Add(10 * time.Second)
		for len(leftovers(filepath.Join(e.home, "runs", d.ID))) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if l := leftovers(filepath.Join(e.home, "runs", d.ID)); len(l) > 0 {
			t.Errorf("left behind after cancel:\n%s", strings.Join(l, "\n"))
		}
	}
	// Cancel while exporting: either the export finished first (succeeded,
	// whole branch) or the run is cancelled with no branch.
	d, res = e.submitOn("native", nil, "--max-files", "5000", "--max-bytes", "209715200", "--agent-cmd",
		manyFiles, "t")
	must(t, res, 0)
	e.waitFor(d.ID, "exporting", func(r *run.Run) bool { return r.State == run.StateExporting || r.State.Terminal() })
	e.run("cancel", d.ID)
	e.run("cancel", d.ID)
	r = e.waitFor(d.ID, "the end", func(r *run.Run) bool { return r.State.Terminal() })
	branch := testsupport.Git(t, e.repo, "branch", "--list", d.Branch)
	switch r.State {
	case run.StateSucceeded:
		if n := testsupport.Git(t, e.repo, "ls-tree", "-r", "--name-only", d.Branch); strings.Count(n, "\n")+1 != 1501 {
			t.Fatalf("succeeded with a partial tree")
		}
	case run.StateCancelled:
		if branch != "" {
			t.Fatalf("cancelled during export yet the branch exists")
		}
	default:
		t.Fatalf("state %s %s", r.State, r.Message)
	}
}

// TestAttackSixSubmitsTwoSlots: six runs at once with max_parallel 2: at
// most two run at any time, all succeed, and they start in submit order.
// What ran at once is read from the journals (from each run's move to
// preparing, made once it holds a slot, to its end state, written before
// it lets the slot go), not from listings taken while the runs go on: a
// listing reads the records one after the other, so it can see a run
// that ended meanwhile still exporting beside the one that took its slot.
func TestAttackSixSubmitsTwoSlots(t *testing.T) {
	e := newEnv(t)
	// Six submits at once, each its own process.
	ids := make([]string, 6)
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "host", "--max-parallel", "2", "--agent-cmd",
				"sleep 1.5; echo x > x.txt", "run "+strconv.Itoa(i))
			cmd.Dir, cmd.Env = e.repo, e.vars
			out, err := cmd.Output()
			var d submitDoc
			if err == nil {
				err = json.Unmarshal(out, &d)
			}
			ids[i] = d.ID
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		e.waitFor(id, "its end", func(r *run.Run) bool { return r.State.Terminal() })
	}
	if n, at := mostAtOnce(t, e, ids); n > 2 {
		t.Fatalf("%d runs at once with max_parallel 2 (at %s)", n, at.Format(time.RFC3339Nano))
	}
	for _, id := range ids {
		if r := e.get(id); r.State != run.StateSucceeded {
			t.Fatalf("run %s: %s %s", id, r.State, r.Message)
		}
	}
	// FIFO: the runs that had to wait for a slot (all but the first two to
	// leave the queue) left it in submission order. Which of six concurrent
	// submits is queued first is the order their records were made (Seq).
	type start struct {
		seq int64
		at  time.Time
	}
	var starts []start
	for _, id := range ids {
		r := e.get(id)
		evs, err := e.store().Events(t.Context(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == run.EventState && ev.State == run.StatePreparing {
				starts = append(starts, start{r.Seq, ev.Time})
				break
			}
		}
	}
	if len(starts) != 6 {
		t.Fatalf("%d runs journaled preparing", len(starts))
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].at.Before(starts[j].at) })
	for i := 3; i < len(starts); i++ {
		if starts[i].seq < starts[i-1].seq {
			t.Fatalf("queued runs started out of order: %+v", starts)
		}
	}
}

// mostAtOnce is the most of runs ids that were active at once, by their
// journals: each from its first move to preparing to its end state, and
// when that many first were.
func mostAtOnce(t *testing.T, e *env, ids []string) (int, time.Time) {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, id := range ids {
		evs, err := e.store().Events(t.Context(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var from, to time.Time
		for _, ev := range evs {
			if ev.Type != run.EventState {
				continue
			}
			if ev.State == run.StatePreparing && from.IsZero() {
				from = ev.Time
			}
			if ev.State.Terminal() {
				to = ev.Time
			}
		}
		if from.IsZero() || to.IsZero() {
			t.Fatalf("run %s: no move to preparing or no end state in its journal", id)
		}
		edges = append(edges, edge{from, 1}, edge{to, -1})
	}
	// An end and a start at the same instant: the end first.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	n, most, when := 0, 0, time.Time{}
	for _, ed := range edges {
		if n += ed.delta; n > most {
			most, when = n, ed.at
		}
	}
	return most, when
}

// TestAttackResumeTwiceAtOnce: two resumes of one interrupted run race;
// one supervisor continues it, the other is refused, and the branch has
// exactly one commit.
func TestAttackResumeTwiceAtOnce(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitOn("native", nil, "--agent-cmd",
		"echo work > work.txt; [ -f .resumed ] || { touch .resumed; sleep 300; }", "t")
	must(t, res, 0)
	r := e.waitFor(d.ID, "the agent", func(r *run.Run) bool {
		return r.Supervisor != nil && fileExists(filepath.Join(e.home, "runs", d.ID, "workspace", ".resumed"))
	})
	_ = syscall.Kill(r.Supervisor.PID, syscall.SIGKILL)
	waitGone(r.Supervisor.PID)
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(e.bin, "resume", "--wait", "--json", d.ID)
			cmd.Dir, cmd.Env = e.repo, e.vars
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			switch {
			case err == nil:
				codes <- 0
			case errors.As(err, &ee):
				if ee.ExitCode() != 2 {
					t.Logf("resume: exit %d\n%s", ee.ExitCode(), out)
				}
				codes <- ee.ExitCode()
			default:
				codes <- -1
			}
		}()
	}
	a, b := <-codes, <-codes
	if a+b != 2 || (a != 0 && b != 0) {
		t.Fatalf("two resumes exited %d and %d, want 0 and 2", a, b)
	}
	r = e.get(d.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 2 {
		t.Fatalf("state %s, %d attempts", r.State, len(r.Attempts))
	}
	if n := testsupport.Git(t, e.repo, "rev-list", "--count", "main.."+d.Branch); n != "1" {
		t.Fatalf("branch has %s commits", n)
	}
}

// TestAttackNoProcessOutlivesNativeRun: an agent and a check that
// daemonize (setsid, double fork) leave nothing running once the run ends,
// whether it succeeds, times out or is cancelled.
func TestAttackNoProcessOutlivesNativeRun(t *testing.T) {
	e := newEnv(t)
	daemon := "setsid sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 & (sleep 300 </dev/null >/dev/null 2>&1 &); "
	cases := []struct {
		name  string
		args  []string
		state run.State
	}{
		{"succeeded", []string{"--agent-cmd", daemon + "echo d > d.txt", "--check", "c=" + daemon + "true", "--wait"}, run.StateSucceeded},
		{"timed out", []string{"--timeout", "2s", "--agent-cmd", daemon + "echo d > d.txt", "--check", "c=" + daemon + "sleep 300", "--wait"}, run.StateFailed},
		{"cancelled", []string{"--agent-cmd", daemon + "touch .up; sleep 300"}, run.StateCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, res := e.submitOn("native", nil, append(c.args, c.name)...)
			if c.state == run.StateCancelled {
				must(t, res, 0)
				e.waitFor(d.ID, "the agent", func(r *run.Run) bool {
					return fileExists(filepath.Join(e.home, "runs", d.ID, "workspace", ".up"))
				})
				must(t, e.run("cancel", d.ID), 0)
			}
			r := e.waitFor(d.ID, "the end", func(r *run.Run) bool { return r.State.Terminal() })
			if r.State != c.state {
				t.Fatalf("state %s (%s): %s", r.State, r.Reason, r.Message)
			}
			runDir := filepath.Join(e.home, "runs", d.ID)
			deadline := time.Now().Add(10 * time.Second)
			for len(leftovers(runDir)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if l := leftovers(runDir); len(l) > 0 {
				t.Fatalf("outlived the run:\n%s", strings.Join(l, "\n"))
			}
		})
	}
}
