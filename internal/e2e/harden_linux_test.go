package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// quick runs the binary with a short deadline: a command that hangs (a
// FIFO read) fails the test instead of the test run. The process gets
// SIGTERM at the deadline, then SIGKILL.
func (e *env) quick(args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Second
	cmd.Dir = e.repo
	cmd.Env = e.vars
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		e.t.Fatalf("agentrun %v did not return within 10s (stderr: %s)", args, se.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("agentrun %v: %v", args, err)
	}
	return result{code, so.String(), se.String()}
}

func errorDoc(t *testing.T, res result) map[string]any {
	t.Helper()
	var doc struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || doc.Error == nil {
		t.Fatalf("not a JSON error (exit %d): %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	return doc.Error
}

// addRun stores a run record as the CLI would have made it.
func (e *env) addRun(state run.State) *run.Run {
	e.t.Helper()
	id := run.NewID()
	r := &run.Run{ID: id, State: state, Task: "t", Repo: e.repo, Base: strings.Repeat("b", 40), Branch: run.BranchName(id),
		Agent: run.AgentSpec{Name: "command", Command: "true"}, Sandbox: run.SandboxConfig{Backend: "host"}}
	if err := e.store().Create(context.Background(), r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestDamagedRecordsThroughTheBinary: a run.json that is a FIFO, a
// directory, or names an unknown state is a damaged record: list names it
// broken and returns (never blocks on the FIFO), status says run_damaged
// with exit 2 (the user's environment, not a bug: no "report this"), and
// clean --force removes each.
func TestDamagedRecordsThroughTheBinary(t *testing.T) {
	e := newEnv(t)
	good := e.addRun(run.StateSucceeded)
	st := e.store()
	fifo, dir, unknown := e.addRun(run.StateSucceeded), e.addRun(run.StateSucceeded), e.addRun(run.StateSucceeded)
	os.Remove(st.L.RunJSON(fifo.ID))
	if err := unix.Mkfifo(st.L.RunJSON(fifo.ID), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(st.L.RunJSON(dir.ID))
	os.Mkdir(st.L.RunJSON(dir.ID), 0o700)
	data, _ := os.ReadFile(st.L.RunJSON(unknown.ID))
	os.WriteFile(st.L.RunJSON(unknown.ID), bytes.Replace(data, []byte(`"status": "succeeded"`), []byte(`"status": "exploded"`), 1), 0o600)

	res := e.quick("list", "--json")
	must(t, res, 0)
	var doc struct {
		Runs   []struct{ ID string }
		Broken []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || len(doc.Runs) != 1 || doc.Runs[0].ID != good.ID || len(doc.Broken) != 3 {
		t.Fatalf("list: %v %s", err, res.stdout)
	}
	for _, r := range []*run.Run{fifo, dir, unknown} {
		res := e.quick("status", "--json", r.ID)
		ed := errorDoc(t, res)
		if res.code != 2 || ed["code"] != "run_damaged" || strings.Contains(res.stdout, "report this") {
			t.Fatalf("status of damaged %s: exit %d %v", r.ID, res.code, ed)
		}
	}
	// --finished keeps them (and returns), --force by id removes them.
	must(t, e.quick("clean", "--finished", "--json"), 0)
	for _, r := range []*run.Run{fifo, dir, unknown} {
		res := e.quick("clean", "--force", "--json", r.ID)
		must(t, res, 0)
		if fileExists(st.RunDir(r.ID)) {
			t.Fatalf("clean --force left %s", r.ID)
		}
	}
}

// fullTmpfs mounts a small tmpfs at dir (root only; skipped otherwise, a
// failure with AGENTRUN_REQUIRE_CAPS=1) and returns a function that fills
// it with the file at path, to the last byte.
func fullTmpfs(t *testing.T, dir string) (fill func(path string)) {
	t.Helper()
	testsupport.Tmpfs(t, dir, "2m")
	return func(path string) { testsupport.FillDisk(t, path) }
}

// TestFullDiskThroughTheBinary: a run whose supervisor died after its
// workspace filled the data directory's disk. Commands that read it do
// not journal an interrupted transition the record cannot take (however
// often they run); submit says disk_full (exit 2, not "report this");
// cancel says the run has stopped; clean removes it without --force and
// frees the space.
func TestFullDiskThroughTheBinary(t *testing.T) {
	e := newEnv(t)
	fill := fullTmpfs(t, e.home)
	r := e.addRun(run.StateQueued)
	st := e.store()
	if _, err := st.Transition(context.Background(), r.ID, []run.State{run.StateQueued}, run.StateRunning, "", "attempt 1"); err != nil {
		t.Fatal(err)
	}
	ws := st.L.Workspace(r.ID)
	os.MkdirAll(ws, 0o755)
	fill(filepath.Join(ws, "huge.bin"))
	journal := func() int {
		evs, err := st.Events(context.Background(), r.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	before := journal()
	for range 3 {
		res := e.quick("status", "--json", r.ID)
		must(t, res, 0)
		e.quick("list", "--json")
	}
	if n := journal(); n != before {
		evs, _ := st.Events(context.Background(), r.ID, 0)
		t.Fatalf("the journal grew from %d to %d events while run.json could not be written: %+v", before, n, evs[before:])
	}
	if got := e.get(r.ID); got.State != run.StateRunning {
		t.Fatalf("record %s", got.State)
	}

	res := e.quick("submit", "--json", "--sandbox", "host", "--agent-cmd", "true", "t")
	if ed := errorDoc(t, res); res.code != 2 || ed["code"] != "disk_full" || strings.Contains(res.stdout, "report this") {
		t.Fatalf("submit on a full disk: exit %d %v", res.code, ed)
	}

	res = e.quick("cancel", "--json", r.ID)
	must(t, res, 0)
	var cd struct {
		Status       string `json:"status"`
		AlreadyEnded bool   `json:"already_ended"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &cd); err != nil || cd.Status != string(run.StateInterrupted) || !cd.AlreadyEnded ||
		!strings.Contains(res.stderr, "no space left") {
		t.Fatalf("cancel of the dead run: %v %s\nstderr: %s", err, res.stdout, res.stderr)
	}

	res = e.quick("clean", "--json", r.ID)
	must(t, res, 0)
	if fileExists(st.RunDir(r.ID)) {
		t.Fatal("clean left the run")
	}
	// The space is back: a run can be submitted again.
	d, res := e.submitJSON(nil, "--sandbox", "host", "--agent-cmd", "true", "--wait", "t")
	if res.code != 1 || d.Reason != string(run.ReasonNoChanges) {
		t.Fatalf("submit after clean: exit %d %+v\n%s", res.code, d, res.stderr)
	}
}
