package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The docker sandbox through the binary, on the engine and image that
// .ci/install-podman.sh sets up:
//
//	eval "$(bash .ci/install-podman.sh)"
const (
	dockerHostEnv  = "AGENTRUN_DOCKER_TEST_HOST"
	dockerImageEnv = "AGENTRUN_DOCKER_TEST_IMAGE"
)

// useDocker points this installation at the test engine (DOCKER_HOST for
// every later command, the supervisor's too) and returns the test image,
// or skips (fails with AGENTRUN_REQUIRE_CAPS=1).
func (e *env) useDocker() string {
	e.t.Helper()
	host, image := os.Getenv(dockerHostEnv), os.Getenv(dockerImageEnv)
	testsupport.Require(e.t, "a container engine and a test image", host != "" && image != "",
		"%s and %s are unset (eval \"$(bash .ci/install-podman.sh)\" sets them)", dockerHostEnv, dockerImageEnv)
	for _, v := range e.vars {
		if v == "DOCKER_HOST="+host {
			return image
		}
	}
	e.vars = append(e.vars, "DOCKER_HOST="+host)
	// A test that fails half-way leaves no container running: remove
	// those of this installation's repository (only ours carry the label).
	e.t.Cleanup(func() { removeContainers(e.t, docker.LabelRepo+"="+e.repo) })
	return image
}

// submitDocker submits with --sandbox docker and the test image.
func (e *env) submitDocker(extraEnv []string, args ...string) (submitDoc, result) {
	e.t.Helper()
	return e.submitOn("docker", extraEnv, args...)
}

// engine is a client of the test engine.
func engine(t testing.TB) *client.Client {
	t.Helper()
	cl, err := client.New(client.WithHost(os.Getenv(dockerHostEnv)), client.WithAPIVersionFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cl.Close()
		t.Fatal(err)
	}
	return cl
}

// removeContainers removes every container with label (KEY=VALUE).
func removeContainers(t testing.TB, label string) {
	cl := engine(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cl.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		t.Errorf("list the test's containers: %v", err)
		return
	}
	for _, c := range res.Items {
		cl.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// containersOf are the ids of the containers the engine holds for run id
// (by the backend's label), running or not.
func containersOf(t *testing.T, id string) []string {
	t.Helper()
	cl := engine(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cl.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", docker.LabelRun+"="+id)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// inContainer is a check that passes only inside a docker sandbox: the
// runner binary is mounted at /.agentrun, and the host has none.
const inContainer = "test -x /.agentrun/agentrun && test \"$(pwd)\" = /workspace"

// TestDockerSubmitExportsBranchAndPatch: the agent edits files in the
// container, the checks run in it, and the result is a commit on
// agentrun/<id> and a patch that applies to the base.
func TestDockerSubmitExportsBranchAndPatch(t *testing.T) {
	e := newEnv(t)
	image := e.useDocker()
	base := testsupport.Git(t, e.repo, "rev-parse", "HEAD")
	d, res := e.submitDocker(nil, "--agent-cmd", "cat > task.txt; echo hi > new.txt; echo changed >> README.md",
		"--check", "inside="+inContainer, "--check", "ok=grep -q hi new.txt", "--wait", "add new.txt")
	must(t, res, 0)
	if d.Status != "succeeded" || d.Branch != "agentrun/"+d.ID || d.Commit == "" {
		t.Fatalf("result %+v\n%s", d, res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "rev-parse", d.Branch); got != d.Commit {
		t.Fatalf("branch at %s, want %s", got, d.Commit)
	}
	if parent := testsupport.Git(t, e.repo, "rev-parse", d.Commit+"^"); parent != base {
		t.Fatalf("parent %s, want base %s", parent, base)
	}
	for f, want := range map[string]string{"new.txt": "hi", "task.txt": "add new.txt", "README.md": "hello\nchanged"} {
		if got := testsupport.Git(t, e.repo, "show", d.Commit+":"+f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	clone := filepath.Join(e.root, "clone")
	testsupport.Git(t, e.root, "clone", "-q", e.repo, clone)
	testsupport.Git(t, clone, "checkout", "-q", base)
	testsupport.Git(t, clone, "apply", "--index", d.Patch)
	r := e.get(d.ID)
	if r.Sandbox.Backend != "docker" || r.Sandbox.Image != image || r.Provenance.Sandbox != "docker" || r.Provenance.ImageID != image {
		t.Fatalf("recorded sandbox %+v, provenance %s %s", r.Sandbox, r.Provenance.Sandbox, r.Provenance.ImageID)
	}
	if len(r.Attempts) != 1 || len(r.Attempts[0].Checks) != 2 || !r.Attempts[0].Checks[0].Passed {
		t.Fatalf("attempts %+v", r.Attempts)
	}
	// The container goes once the run has ended, before its supervisor
	// exits (the sandbox is destroyed after the end is stored).
	e.released(d.ID)
	if c := containersOf(t, d.ID); len(c) != 0 {
		t.Fatalf("the run's container is left: %v", c)
	}
}

// TestDockerChecksFailThenPass: a failing check in the container gives a
// second attempt, told what failed.
func TestDockerChecksFailThenPass(t *testing.T) {
	e := newEnv(t)
	e.useDocker()
	agent := `if grep -qi 'check "good" failed'; then echo good > state.txt; else echo bad > state.txt; fi`
	d, res := e.submitDocker(nil, "--agent-cmd", agent, "--attempts", "3",
		"--check", "good="+inContainer+" && echo checking && grep -q good state.txt", "--wait", "make state good")
	must(t, res, 0)
	r := e.get(d.ID)
	if len(r.Attempts) != 2 || r.Attempts[0].Checks[0].Passed || !r.Attempts[1].Checks[0].Passed {
		t.Fatalf("attempts %+v", r.Attempts)
	}
	prompt, _ := os.ReadFile(filepath.Join(d.RunDir, "attempts", "2", "prompt.txt"))
	if !strings.HasPrefix(string(prompt), "make state good") || !strings.Contains(string(prompt), "checking") {
		t.Fatalf("second prompt lacks the task or the check's output:\n%s", prompt)
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":state.txt"); got != "good" {
		t.Fatalf("state.txt = %q", got)
	}
}

// killMidAttempt submits a run whose first attempt hangs (after some
// work) and SIGKILLs its supervisor there; the container lives on.
func killMidAttempt(t *testing.T, e *env) submitDoc {
	t.Helper()
	agent := "if grep -q resumed; then echo done > done.txt; else echo partial > partial.txt; sleep 300; fi"
	d, res := e.submitDocker(nil, "--agent-cmd", agent, "--check", "done=test -f done.txt", "fix it")
	must(t, res, 0)
	ws := filepath.Join(e.home, "runs", d.ID, "workspace")
	r := e.waitFor(d.ID, "the agent to start", func(r *run.Run) bool {
		return r.State == run.StateRunning && r.Supervisor != nil && fileExists(filepath.Join(ws, "partial.txt"))
	})
	if c := containersOf(t, d.ID); len(c) != 1 {
		t.Fatalf("control: the run's container is not seen: %v", c)
	}
	if err := syscall.Kill(r.Supervisor.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(r.Supervisor.PID)
	if c := containersOf(t, d.ID); len(c) != 1 {
		t.Fatalf("the container went with its supervisor: nothing to sweep (%v)", c)
	}
	return d
}

// TestDockerKill9ReconcileSweepsAndResumes: kill -9 of the supervisor
// mid-attempt leaves its container running; the next command that reads
// the run marks it interrupted and removes that container (and no other
// run's); resume finishes the run in a new one.
func TestDockerKill9ReconcileSweepsAndResumes(t *testing.T) {
	e := newEnv(t)
	e.useDocker()
	other := killMidAttempt(t, e)
	d := killMidAttempt(t, e)
	res := e.run("status", "--json", d.ID)
	must(t, res, 0)
	if !strings.Contains(res.stdout, `"interrupted"`) {
		t.Fatalf("status after kill -9: %s", res.stdout)
	}
	if c := containersOf(t, d.ID); len(c) != 0 {
		t.Fatalf("the interrupted run's container is left after status: %v", c)
	}
	if c := containersOf(t, other.ID); len(c) != 1 {
		t.Fatalf("another run's container was touched: %v", c)
	}
	ev := e.run("logs", "--events", "--json", d.ID)
	if !strings.Contains(ev.stdout, "removed the sandbox the stopped supervisor left") {
		t.Errorf("the sweep is not in the journal:\n%s", ev.stdout)
	}
	// list reconciles the other run too.
	must(t, e.run("list", "--json"), 0)
	if c := containersOf(t, other.ID); len(c) != 0 {
		t.Fatalf("list left the other interrupted run's container: %v", c)
	}
	ws := filepath.Join(e.home, "runs", d.ID, "workspace")
	if b, err := os.ReadFile(filepath.Join(ws, "partial.txt")); err != nil || string(b) != "partial\n" {
		t.Fatalf("workspace not intact: %q %v", b, err)
	}
	res = e.run("resume", "--wait", "--json", "--task", "finish the job", d.ID)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s\nsupervisor log:\n%s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID))
	}
	r := e.get(d.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 2 || !r.Attempts[1].Resumed {
		t.Fatalf("after resume: %s, %+v", r.State, r.Attempts)
	}
	for _, f := range []string{"partial.txt", "done.txt"} {
		testsupport.Git(t, e.repo, "cat-file", "-e", r.Commit+":"+f)
	}
	e.released(d.ID) // (as in TestDockerSubmitExportsBranchAndPatch)
	if c := containersOf(t, d.ID); len(c) != 0 {
		t.Fatalf("containers left after the resumed run: %v", c)
	}
}

// TestDockerCleanSweepsInterrupted: a run marked interrupted while the
// engine could not be reached keeps its container; agentrun clean removes
// it (and keeps the run, which can be resumed).
func TestDockerCleanSweepsInterrupted(t *testing.T) {
	e := newEnv(t)
	e.useDocker()
	d := killMidAttempt(t, e)
	down := "DOCKER_HOST=unix://" + filepath.Join(e.root, "no-engine.sock")
	res := e.agentrun([]string{down}, "status", "--json", d.ID)
	must(t, res, 0)
	if r := e.get(d.ID); r.State != run.StateInterrupted {
		t.Fatalf("state %s", r.State)
	}
	if c := containersOf(t, d.ID); len(c) != 1 {
		t.Fatalf("control: the container should be left while the engine is out of reach: %v", c)
	}
	res = e.run("clean", "--finished", "--json")
	must(t, res, 0)
	var out struct {
		Sandboxes []struct {
			Backend string `json:"backend"`
			RunID   string `json:"run_id"`
		} `json:"sandboxes"`
		Kept []struct{ ID, Code string } `json:"kept"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, res.stdout)
	}
	if len(out.Sandboxes) != 1 || out.Sandboxes[0].RunID != d.ID || out.Sandboxes[0].Backend != "docker" {
		t.Fatalf("clean removed %+v, want the container of %s", out.Sandboxes, d.ID)
	}
	if c := containersOf(t, d.ID); len(c) != 0 {
		t.Fatalf("left after clean: %v", c)
	}
	if len(out.Kept) != 1 || out.Kept[0].ID != d.ID || out.Kept[0].Code != "interrupted" {
		t.Fatalf("kept %+v: the interrupted run should stay", out.Kept)
	}
}
