package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestSubmitWaitExportsBranchAndPatch(t *testing.T) {
	e := newEnv(t)
	base := testsupport.Git(t, e.repo, "rev-parse", "HEAD")
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", `sh -c "echo hi > new.txt"`,
		"--check", "ok=test -f new.txt", "--wait", "add new.txt\n\nmore detail")
	must(t, res, 0)
	if d.Status != "succeeded" || d.Reason != "completed" || d.Branch != "agentrun/"+d.ID || d.Commit == "" {
		t.Fatalf("result %+v", d)
	}
	if !strings.Contains(res.stderr, "does not isolate") {
		t.Errorf("no host warning on stderr: %q", res.stderr)
	}
	// The same warnings, in the document and on the run's record.
	if d.Warnings == nil || !slices.ContainsFunc(*d.Warnings, func(w string) bool { return strings.Contains(w, "does not isolate") }) ||
		!strings.Contains(res.stderr, "warning: "+(*d.Warnings)[0]+"\n") {
		t.Errorf("submit --json warnings %v; stderr %q", d.Warnings, res.stderr)
	}
	// One commit on the branch whose parent is the base.
	if got := testsupport.Git(t, e.repo, "rev-parse", d.Branch); got != d.Commit {
		t.Fatalf("branch at %s, want %s", got, d.Commit)
	}
	if parent := testsupport.Git(t, e.repo, "rev-parse", d.Commit+"^"); parent != base {
		t.Fatalf("parent %s, want base %s", parent, base)
	}
	if n := testsupport.Git(t, e.repo, "rev-list", "--count", base+".."+d.Branch); n != "1" {
		t.Fatalf("%s commits on the branch", n)
	}
	msg := testsupport.Git(t, e.repo, "log", "-1", "--format=%B", d.Commit)
	if msg != "add new.txt\n\nAgentrun-Run: "+d.ID {
		t.Fatalf("message %q", msg)
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":new.txt"); got != "hi" {
		t.Fatalf("new.txt = %q", got)
	}
	// The patch applies to the base.
	clone := filepath.Join(e.root, "clone")
	testsupport.Git(t, e.root, "clone", "-q", e.repo, clone)
	testsupport.Git(t, clone, "checkout", "-q", base)
	testsupport.Git(t, clone, "apply", "--index", d.Patch)
	if b, err := os.ReadFile(filepath.Join(clone, "new.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("patch applied: %q %v", b, err)
	}
	// The user's working tree is untouched.
	if fileExists(filepath.Join(e.repo, "new.txt")) {
		t.Fatal("the run wrote into the user's working tree")
	}
	r := e.get(d.ID)
	if d.Warnings != nil && !slices.Equal(r.Warnings, *d.Warnings) {
		t.Errorf("the record's warnings %q, the document's %q", r.Warnings, *d.Warnings)
	}
	p := r.Provenance
	if p.Version == "" || p.Host == "" || p.Mode != "lite" || p.Sandbox != "host" || p.BaseCommit != base ||
		p.AgentCommand != `sh -c "echo hi > new.txt"` || !strings.HasPrefix(p.PolicyDigest, "sha256:") {
		t.Fatalf("provenance %+v", p)
	}
	if len(r.Attempts) != 1 || len(r.Attempts[0].Checks) != 1 || !r.Attempts[0].Checks[0].Passed {
		t.Fatalf("attempts %+v", r.Attempts)
	}
	if r.Supervisor != nil {
		t.Fatalf("supervisor still recorded: %+v", r.Supervisor)
	}
	log, err := os.ReadFile(filepath.Join(d.RunDir, r.Attempts[0].Checks[0].Log))
	if err != nil {
		t.Fatalf("check log: %v", err)
	}
	_ = log
}

func TestTaskReachesAgentOnStdinNotThroughShell(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(e.root, "pwned")
	task := "$(touch " + marker + ") `touch " + marker + "`; touch " + marker
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "cat > task.txt", "--wait", task)
	must(t, res, 0)
	if fileExists(marker) {
		t.Fatal("the task text was run by a shell")
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":task.txt"); got != task {
		t.Fatalf("agent got %q", got)
	}
	// Profiles that take the prompt as an argument use "$(cat)": the task
	// is still data. Run the same construction.
	d, res = e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", `printf '%s' "$(cat)" > arg.txt`, "--wait", task)
	must(t, res, 0)
	if fileExists(marker) {
		t.Fatal("the task text was run by a shell")
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":arg.txt"); got != task {
		t.Fatalf("agent got %q", got)
	}
}

func TestChecksFailThenPassAcrossAttempts(t *testing.T) {
	e := newEnv(t)
	// The agent fixes the file only when its prompt says a check failed.
	agent := `if grep -qi 'check "good" failed' ; then echo good > state.txt; else echo bad > state.txt; fi`
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", agent, "--attempts", "3",
		"--check", "good=echo checking; grep -q good state.txt", "--wait", "make state good")
	must(t, res, 0)
	r := e.get(d.ID)
	if len(r.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(r.Attempts))
	}
	if r.Attempts[0].Checks[0].Passed || !r.Attempts[1].Checks[0].Passed {
		t.Fatalf("checks %+v / %+v", r.Attempts[0].Checks, r.Attempts[1].Checks)
	}
	prompt, _ := os.ReadFile(filepath.Join(d.RunDir, "attempts", "2", "prompt.txt"))
	if !strings.HasPrefix(string(prompt), "make state good") || !strings.Contains(string(prompt), "checking") {
		t.Fatalf("second prompt lacks the task or the check output tail:\n%s", prompt)
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":state.txt"); got != "good" {
		t.Fatalf("state.txt = %q", got)
	}
}

func TestChecksNeverPass(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "--attempts", "2",
		"--check", "never=false", "--wait", "task")
	must(t, res, 1)
	if d.Status != "failed" || d.Reason != "checks_failed" || d.Commit != "" {
		t.Fatalf("%+v", d)
	}
	if n := len(e.get(d.ID).Attempts); n != 2 {
		t.Fatalf("%d attempts", n)
	}
	if out := testsupport.Git(t, e.repo, "branch", "--list", d.Branch); out != "" {
		t.Fatalf("branch exists: %q", out)
	}
}

func TestNoChangesFails(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "true", "--wait", "do nothing")
	must(t, res, 1)
	if d.Status != "failed" || d.Reason != "no_changes" {
		t.Fatalf("%+v", d)
	}
}

func TestAgentFailure(t *testing.T) {
	e := newEnv(t)
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "echo oops; exit 3", "--attempts", "1", "--wait", "t")
	must(t, res, 1)
	if d.Reason != "agent_failed" {
		t.Fatalf("%+v", d)
	}
	if c := e.get(d.ID).Attempts[0].ExitCode; c == nil || *c != 3 {
		t.Fatalf("exit code %v", c)
	}
}

func TestTimeoutKillsAgent(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.root, "bg.pid")
	start := time.Now()
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "sleep 300 & echo $! > "+pidFile+"; wait",
		"--timeout", "1s", "--wait", "slow")
	must(t, res, 1)
	if d.Status != "failed" || d.Reason != "timeout" {
		t.Fatalf("%+v", d)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("took %s", el)
	}
	assertGone(t, pidFile)
}

// assertGone checks that the pid in file is no longer running.
func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("agent did not record its child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the agent's background child %d is still running", pid)
}

// alive reports whether pid runs: whether any of its threads has not
// exited yet. A zombie counts as gone only once all its threads are: a
// killed process's first thread can be a zombie while the others still
// hold its open files (and so its locks).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			continue
		}
		if f := statFields(string(b)); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// statFields are a /proc/PID/stat line's fields after the command's name
// (which may hold spaces and parentheses): [0] is the state, [1] the
// parent's pid, [3] the session, [19] the start time.
func statFields(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func TestCancelRunning(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.root, "bg.pid")
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "sleep 300 & echo $! > "+pidFile+"; wait", "slow")
	must(t, res, 0)
	e.waitFor(d.ID, "the agent to start", func(r *run.Run) bool { return r.State == run.StateRunning && fileExists(pidFile) })
	res = e.run("cancel", d.ID)
	must(t, res, 0)
	r := e.get(d.ID)
	if r.State != run.StateCancelled || r.Reason != run.ReasonCancelled {
		t.Fatalf("state %s/%s", r.State, r.Reason)
	}
	assertGone(t, pidFile)
	// Cancelling again changes nothing.
	res = e.run("cancel", d.ID)
	must(t, res, 0)
	if !strings.Contains(res.stdout, "already ended") {
		t.Fatalf("second cancel: %q", res.stdout)
	}
}

func TestCancelQueuedNeverStartsAgent(t *testing.T) {
	e := newEnv(t)
	blockerPid := filepath.Join(e.root, "blocker.pid")
	blocker, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd",
		"sleep 300 & echo $! > "+blockerPid+"; wait", "blocker")
	must(t, res, 0)
	e.waitFor(blocker.ID, "the blocker to run", func(r *run.Run) bool { return r.State == run.StateRunning })
	marker := filepath.Join(e.root, "started")
	d, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd", "touch "+marker, "queued")
	must(t, res, 0)
	time.Sleep(100 * time.Millisecond) // its supervisor is waiting for the slot
	if r := e.get(d.ID); r.State != run.StateQueued {
		t.Fatalf("second run is %s, want queued", r.State)
	}
	must(t, e.run("cancel", d.ID), 0)
	must(t, e.run("cancel", blocker.ID), 0)
	time.Sleep(200 * time.Millisecond)
	if fileExists(marker) {
		t.Fatal("a cancelled queued run started its agent")
	}
	if r := e.get(d.ID); r.State != run.StateCancelled || len(r.Attempts) != 0 {
		t.Fatalf("%s, %d attempts", r.State, len(r.Attempts))
	}
	assertGone(t, blockerPid)
}

// TestCancelRace submits and cancels at once, many times, with the slot
// free and with it busy: the agent of a run whose cancel came first (its
// compare-and-set won) never starts.
func TestCancelRace(t *testing.T) {
	e := newEnv(t)
	n := 25
	if testing.Short() {
		n = 5
	}
	for _, busy := range []bool{false, true} {
		var blocker submitDoc
		if busy {
			var res result
			blocker, res = e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd", "sleep 300", "blocker")
			must(t, res, 0)
		}
		for i := range n {
			marker := filepath.Join(e.root, "started-"+strconv.FormatBool(busy)+strconv.Itoa(i))
			d, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd", "touch "+marker, "race")
			must(t, res, 0)
			must(t, e.run("cancel", d.ID), 0)
			r := e.get(d.ID)
			if r.State != run.StateCancelled {
				// With the slot free a fast run can end before the cancel
				// arrives (the journal shows it reached running first).
				if !busy && r.State.Terminal() && ranBeforeCancel(t, e, d.ID) {
					continue
				}
				t.Fatalf("busy=%v #%d: %s (%s)", busy, i, r.State, r.Message)
			}
			// With the slot free, a quick supervisor may win the race to
			// running (the journal shows it); behind a busy slot it never may.
			if (fileExists(marker) || len(r.Attempts) != 0) && (busy || !ranBeforeCancel(t, e, d.ID)) {
				t.Fatalf("busy=%v #%d: the agent started although the cancel came first", busy, i)
			}
		}
		if busy {
			must(t, e.run("cancel", blocker.ID), 0)
		}
	}
}

// ranBeforeCancel reports whether the journal shows the run moved to
// running before it was cancelled: a supervisor whose compare-and-set to
// running won over the cancel's may start its agent (the cancel then
// stops it). A cancel whose compare-and-set won journals "cancelled" first.
func ranBeforeCancel(t *testing.T, e *env, id string) bool {
	t.Helper()
	evs, err := e.store().Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type != run.EventState {
			continue
		}
		switch ev.State {
		case run.StateRunning:
			return true
		case run.StateCancelled:
			return false
		}
	}
	return false
}

func TestKilledSupervisorIsInterruptedAndResumes(t *testing.T) {
	e := newEnv(t)
	second := filepath.Join(e.root, "second")
	// Attempt 1 hangs (after writing some work); a resumed attempt finishes.
	pgidFile := filepath.Join(e.root, "pgid")
	agent := "echo partial > partial.txt; if [ -f " + second + " ]; then echo done > done.txt; else echo $$ > " + pgidFile + "; touch " + second + "; sleep 300; fi"
	// The host backend does not isolate: a hung agent orphaned by kill -9
	// of its supervisor is cleaned up here.
	t.Cleanup(func() {
		if b, err := os.ReadFile(pgidFile); err == nil {
			if pg, _ := strconv.Atoi(strings.TrimSpace(string(b))); pg > 1 {
				_ = syscall.Kill(-pg, syscall.SIGKILL)
			}
		}
	})
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", agent, "--check", "done=test -f done.txt", "fix it")
	must(t, res, 0)
	r := e.waitFor(d.ID, "the agent to start", func(r *run.Run) bool {
		return r.State == run.StateRunning && r.Supervisor != nil && fileExists(second)
	})
	if err := syscall.Kill(r.Supervisor.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Wait for the lock to be released by the kernel.
	deadline := time.Now().Add(10 * time.Second)
	for alive(r.Supervisor.PID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	res = e.run("status", "--json", d.ID)
	must(t, res, 0)
	if !strings.Contains(res.stdout, `"interrupted"`) {
		t.Fatalf("status after kill -9: %s", res.stdout)
	}
	if r := e.get(d.ID); r.State != run.StateInterrupted || r.Reason != run.ReasonInterrupted {
		t.Fatalf("state %s/%s", r.State, r.Reason)
	}
	ws := filepath.Join(e.home, "runs", d.ID, "workspace")
	if b, err := os.ReadFile(filepath.Join(ws, "partial.txt")); err != nil || string(b) != "partial\n" {
		t.Fatalf("workspace not intact: %q %v", b, err)
	}
	res = e.run("resume", "--wait", "--json", "--task", "finish the job", d.ID)
	must(t, res, 0)
	r = e.get(d.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 2 || !r.Attempts[1].Resumed ||
		r.Attempts[0].Outcome != run.ReasonInterrupted || r.Attempts[0].FinishedAt == nil {
		t.Fatalf("after resume: %s, %+v", r.State, r.Attempts)
	}
	prompt, _ := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "attempts", "2", "prompt.txt"))
	if !strings.Contains(string(prompt), "resumed") || !strings.Contains(string(prompt), "finish the job") {
		t.Fatalf("resumed prompt:\n%s", prompt)
	}
	for _, f := range []string{"partial.txt", "done.txt"} {
		testsupport.Git(t, e.repo, "cat-file", "-e", r.Commit+":"+f)
	}
	// A succeeded run is not resumable.
	res = e.run("resume", d.ID)
	must(t, res, 2)
}

func TestMaxParallelStartsInOrder(t *testing.T) {
	e := newEnv(t)
	order := filepath.Join(e.root, "order")
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		d, res := e.submitJSON(nil, "--sandbox", "host", "--max-parallel", "1", "--agent-cmd",
			"echo "+name+" >> "+order+"; sleep 0.2; echo "+name+" > out.txt", name)
		must(t, res, 0)
		ids = append(ids, d.ID)
	}
	var started []time.Time
	for _, id := range ids {
		r := e.waitFor(id, "the run to end", func(r *run.Run) bool { return r.State.Terminal() })
		if r.State != run.StateSucceeded {
			t.Fatalf("run %s: %s %s", id, r.State, r.Message)
		}
		started = append(started, r.Attempts[0].StartedAt)
	}
	b, _ := os.ReadFile(order)
	if string(b) != "a\nb\nc\n" {
		t.Fatalf("start order %q", b)
	}
	for i := 1; i < len(started); i++ {
		prev := e.get(ids[i-1])
		if started[i].Before(*prev.FinishedAt) && started[i].Before(prev.Attempts[0].FinishedAt.Add(-time.Millisecond)) {
			t.Fatalf("run %d started before run %d ended (max_parallel=1)", i, i-1)
		}
	}
}

func TestDirtyRepository(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.repo, "README.md"), []byte("local edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := e.run("submit", "--sandbox", "host", "--agent-cmd", "cat README.md > seen.txt", "t")
	must(t, res, 2)
	if !strings.Contains(res.stderr, "uncommitted") || len(e.runIDs()) != 0 {
		t.Fatalf("dirty repo: %q, runs %v", res.stderr, e.runIDs())
	}
	d, res := e.submitJSON(nil, "--sandbox", "host", "--include-dirty", "--agent-cmd", "cat README.md > seen.txt", "--wait", "t")
	must(t, res, 0)
	if !strings.Contains(res.stderr, "without them") {
		t.Errorf("no note that the run starts from the base: %q", res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":seen.txt"); got != "hello" {
		t.Fatalf("the agent saw %q; uncommitted changes leaked into the run", got)
	}
	if !e.get(d.ID).Dirty {
		t.Fatal("run not marked dirty")
	}
}

func TestBadInputCreatesNothing(t *testing.T) {
	e := newEnv(t)
	empty := filepath.Join(e.root, "empty")
	_ = os.MkdirAll(empty, 0o755)
	unborn := filepath.Join(e.root, "unborn")
	_ = os.MkdirAll(unborn, 0o755)
	testsupport.Git(t, unborn, "init", "-q")
	taskFile := filepath.Join(e.root, "task.txt")
	_ = os.WriteFile(taskFile, []byte("from file"), 0o644)
	ok := []string{"--sandbox", "host", "--agent-cmd", "true"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing repo", append([]string{"--repo", filepath.Join(e.root, "nope")}, append(ok, "t")...), 2, "repo_missing"},
		{"not a git repo", append([]string{"--repo", empty}, append(ok, "t")...), 2, "not_git_repo"},
		{"no commits", append([]string{"--repo", unborn}, append(ok, "t")...), 2, "no_commits"},
		{"unknown base", append([]string{"--base", "no-such-branch"}, append(ok, "t")...), 2, "unknown_base"},
		{"option-like base", append([]string{"--base", "--output=/tmp/x"}, append(ok, "t")...), 2, "unknown_base"},
		{"empty task", ok, 2, "empty_task"},
		{"blank task", append(ok, "  \n"), 2, "empty_task"},
		{"unknown agent", []string{"--sandbox", "host", "--agent", "nosuch", "t"}, 2, "unknown_agent"},
		{"no agent", []string{"--sandbox", "host", "t"}, 2, "no_agent"},
		{"check without =", append(ok, "--check", "lint", "t"), 2, "bad_check"},
		{"check bad name", append(ok, "--check", "../x=true", "t"), 2, "bad_check"},
		{"attempts 0", append(ok, "--attempts", "0", "t"), 2, "bad_attempts"},
		{"wait and follow", append(ok, "--wait", "--follow", "t"), 2, "conflicting_flags"},
		{"agent and agent-cmd", []string{"--sandbox", "host", "--agent", "claude", "--agent-cmd", "x", "t"}, 2, "conflicting_flags"},
		{"task and task-file", append(ok, "--task-file", taskFile, "t"), 2, "conflicting_flags"},
		{"missing task file", append(ok, "--task-file", filepath.Join(e.root, "nope.txt")), 2, "task_file"},
		{"bad timeout", append(ok, "--timeout", "soon", "t"), 2, "bad_duration"},
		{"bad env", append(ok, "--env", "A-B", "t"), 2, "bad_env"},
		{"bad network", append(ok, "--network", "all", "t"), 2, "bad_network"},
		{"bad allow", append(ok, "--allow", "http://x/", "t"), 2, "bad_allow"},
		{"allow with none", append(ok, "--network", "none", "--allow", "example.com", "t"), 2, "conflicting_flags"},
		{"unknown sandbox", []string{"--sandbox", "nosuch", "--agent-cmd", "true", "t"}, 2, "unknown_sandbox"},
		{"unknown flag", append(ok, "--nope", "t"), 2, "usage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.run(append([]string{"submit", "--json"}, c.args...)...)
			must(t, res, c.code)
			// With --follow the error is one compact line (a JSON-lines stream).
			if !strings.Contains(res.stdout, `"code": "`+c.want+`"`) && !strings.Contains(res.stdout, `"code":"`+c.want+`"`) {
				t.Fatalf("want code %s in %s", c.want, res.stdout)
			}
			if ids := e.runIDs(); len(ids) != 0 {
				t.Fatalf("runs were created: %v", ids)
			}
			if fileExists(e.home) {
				t.Fatalf("the data directory was created")
			}
		})
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"resume", "zzzzzzzzzz"}, 3, "run_not_found"},
		{[]string{"cancel", "zzzzzzzzzz"}, 3, "run_not_found"},
		{[]string{"resume", "../../etc"}, 2, "bad_id"},
		{[]string{"cancel", "x/"}, 2, "bad_id"},
	} {
		res := e.run(append(c.args, "--json")...)
		must(t, res, c.code)
		if !strings.Contains(res.stdout, `"code": "`+c.want+`"`) {
			t.Fatalf("%v: want code %s in %s", c.args, c.want, res.stdout)
		}
	}
	// Ambiguous prefixes: make runs until two share a first character... the
	// alphabet has 32 symbols, so 3-character prefixes collide rarely; use
	// the store directly for the ambiguity case.
}

func TestSecretsNeverReachAgent(t *testing.T) {
	e := newEnv(t)
	secrets := []string{"OPENAI_API_KEY=sk-planted-openai", "ANTHROPIC_API_KEY=sk-planted-anthropic",
		"AWS_SECRET_ACCESS_KEY=planted-aws", "GITHUB_TOKEN=planted-gh", "MY_PASSED=planted-passed"}
	d, res := e.submitJSON(secrets, "--sandbox", "host", "--env", "MY_PASSED", "--agent-cmd", "env > env.txt",
		"--check", "env=env > check-env.txt", "--wait", "dump env")
	must(t, res, 0)
	agentEnv := testsupport.Git(t, e.repo, "show", d.Commit+":env.txt")
	for _, s := range []string{"sk-planted-openai", "sk-planted-anthropic", "planted-aws", "planted-gh"} {
		if strings.Contains(agentEnv, s) {
			t.Errorf("secret %s reached the agent:\n%s", s, agentEnv)
		}
	}
	if !strings.Contains(agentEnv, "MY_PASSED=planted-passed") {
		t.Errorf("--env variable did not reach the agent:\n%s", agentEnv)
	}
	for _, want := range []string{"PATH=", "HOME=", "LANG=C.UTF-8", "TERM=dumb", "TMPDIR="} {
		if !strings.Contains(agentEnv, want) {
			t.Errorf("agent env lacks %s", want)
		}
	}
	// No value is written to any file of the run (the workspace aside,
	// where the agent itself wrote it).
	runDir := filepath.Join(e.home, "runs", d.ID)
	_ = filepath.Walk(runDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.HasPrefix(p, filepath.Join(runDir, "workspace")) || strings.HasSuffix(p, ".patch") {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "planted-") {
			t.Errorf("%s contains a planted value", p)
		}
		return nil
	})
	// The supervisor's process environment does not carry them either.
	// (checked while a run is alive)
	pidFile := filepath.Join(e.root, "sleep.pid")
	d2, res := e.submitJSON(secrets, "--sandbox", "host", "--env", "MY_PASSED", "--agent-cmd", "sleep 300 & echo $! > "+pidFile+"; wait", "sleep")
	must(t, res, 0)
	r := e.waitFor(d2.ID, "the agent", func(r *run.Run) bool { return r.Supervisor != nil && fileExists(pidFile) })
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(r.Supervisor.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(environ), "planted-") {
		t.Errorf("the supervisor's environment holds a planted value")
	}
	must(t, e.run("cancel", d2.ID), 0)
}

func TestFollowStreamsEventsAndOutput(t *testing.T) {
	e := newEnv(t)
	res := e.run("submit", "--sandbox", "host", "--agent-cmd", "echo line-from-agent; echo x > x.txt", "--follow", "t")
	must(t, res, 0)
	for _, want := range []string{"line-from-agent", "running", "succeeded", "branch agentrun/"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("follow output lacks %q:\n%s", want, res.stdout)
		}
	}
}

func TestSupervisorSurvivesCLIExit(t *testing.T) {
	e := newEnv(t)
	// submit returns at once; the run finishes without any CLI attached.
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "sleep 0.3; echo x > x.txt", "t")
	must(t, res, 0)
	if d.Status != "queued" || d.Commit != "" {
		t.Fatalf("%+v", d)
	}
	r := e.waitFor(d.ID, "the run to end", func(r *run.Run) bool { return r.State.Terminal() })
	if r.State != run.StateSucceeded {
		t.Fatalf("%s %s", r.State, r.Message)
	}
	// The supervisor ran in its own session.
	_ = exec.Command
}

func TestResumeFailedRun(t *testing.T) {
	e := newEnv(t)
	agent := `if grep -q "make it pass"; then echo ok > ok.txt; else echo no > no.txt; fi`
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", agent, "--attempts", "1", "--check", "ok=test -f ok.txt", "--wait", "t")
	must(t, res, 1)
	if d.Reason != "checks_failed" {
		t.Fatalf("%+v", d)
	}
	res = e.run("resume", "--wait", "--task", "make it pass", d.ID[:5])
	must(t, res, 0)
	r := e.get(d.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 2 {
		t.Fatalf("%s %d attempts", r.State, len(r.Attempts))
	}
	prompt, _ := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "attempts", "2", "prompt.txt"))
	for _, want := range []string{"failed (checks_failed)", "ok", "make it pass"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("resumed prompt lacks %q:\n%s", want, prompt)
		}
	}
	// Both attempts' work is in the result (the workspace was kept).
	for _, f := range []string{"no.txt", "ok.txt"} {
		testsupport.Git(t, e.repo, "cat-file", "-e", r.Commit+":"+f)
	}
}

func TestTaskFromStdinAndFile(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "host", "--agent-cmd", "cat > task.txt", "--wait", "-")
	cmd.Dir, cmd.Env = e.repo, e.vars
	cmd.Stdin = strings.NewReader("task from stdin\nline two\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	commit := between(string(out), `"commit": "`, `"`)
	if got := testsupport.Git(t, e.repo, "show", commit+":task.txt"); got != "task from stdin\nline two" {
		t.Fatalf("stdin task %q", got)
	}
	if msg := testsupport.Git(t, e.repo, "log", "-1", "--format=%s", commit); msg != "task from stdin" {
		t.Fatalf("subject %q", msg)
	}
	f := filepath.Join(e.root, "task.md")
	_ = os.WriteFile(f, []byte("task from file"), 0o644)
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "cat > task.txt", "--task-file", f, "--wait")
	must(t, res, 0)
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":task.txt"); got != "task from file" {
		t.Fatalf("file task %q", got)
	}
}

func TestFollowJSONIsJSONLines(t *testing.T) {
	e := newEnv(t)
	res := e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "echo out-line; echo x > x.txt", "--follow", "t")
	must(t, res, 0)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	var sawOutput bool
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if m["type"] == "output" && m["kind"] == "agent" && m["line"] == "out-line" {
			sawOutput = true
		}
	}
	var last submitDoc
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if !sawOutput || last.Status != "succeeded" || last.Commit == "" {
		t.Fatalf("output %v, last %+v", sawOutput, last)
	}
}
