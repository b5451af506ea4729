package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord/flock"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// env is one isolated agentrun installation: data dir, config dir, HOME.
type env struct {
	t    testing.TB
	bin  string
	root string
	home string // AGENTRUN_HOME
	repo string
	vars []string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	testsupport.Program(t, "git")
	root := t.TempDir()
	e := &env{t: t, bin: testsupport.Agentrun(t), root: root, home: filepath.Join(root, "data")}
	e.vars = []string{
		"AGENTRUN_HOME=" + e.home,
		"XDG_CONFIG_HOME=" + filepath.Join(root, "config"),
		"HOME=" + filepath.Join(root, "userhome"),
		"PATH=" + os.Getenv("PATH"),
		"LANG=C.UTF-8",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	}
	_ = os.MkdirAll(filepath.Join(root, "userhome"), 0o755)
	e.repo = filepath.Join(root, "repo")
	testsupport.RepoAt(t, e.repo, map[string]string{"README.md": "hello\n"})
	t.Cleanup(e.stopAll)
	return e
}

type result struct {
	code   int
	stdout string
	stderr string
}

// agentrun runs the binary in the repository with extra environment.
func (e *env) agentrun(extraEnv []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Dir = e.repo
	cmd.Env = append(append([]string{}, e.vars...), extraEnv...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("agentrun %v: %v", args, err)
	}
	return result{code, so.String(), se.String()}
}

func (e *env) run(args ...string) result { e.t.Helper(); return e.agentrun(nil, args...) }

// submitJSON runs submit --json and decodes its document.
func (e *env) submitJSON(extraEnv []string, args ...string) (submitDoc, result) {
	e.t.Helper()
	res := e.agentrun(extraEnv, append([]string{"submit", "--json"}, args...)...)
	var d submitDoc
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		e.t.Fatalf("submit output is not JSON (exit %d): %v\nstdout: %s\nstderr: %s", res.code, err, res.stdout, res.stderr)
	}
	return d, res
}

type submitDoc struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	Branch string `json:"branch"`
	Commit string `json:"commit"`
	Patch  string `json:"patch"`
	RunDir string `json:"run_dir"`
	// A pointer: a document without the field (or with null) is told
	// from one with none.
	Warnings *[]string `json:"warnings"`
}

func (e *env) store() *files.Store {
	e.t.Helper()
	st, err := files.Open(e.home)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) get(id string) *run.Run {
	e.t.Helper()
	r, err := e.store().Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// waitState polls run.json until pred holds (without reconciling).
func (e *env) waitFor(id string, what string, pred func(*run.Run) bool) *run.Run {
	e.t.Helper()
	// Only a hang waits this long: generous, for a slow machine (a phase
	// that starts 1,500 processes in a container took over 30 s on one).
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := e.store().Get(context.Background(), id); err == nil && pred(r) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("run %s: timed out waiting for %s; supervisor log:\n%s", id, what, e.supervisorLog(id))
	return nil
}

func (e *env) supervisorLog(id string) string {
	b, _ := os.ReadFile(filepath.Join(e.home, "runs", id, "supervisor.log"))
	return string(b)
}

// agentLog is what run id's agent wrote in its first attempt.
func (e *env) agentLog(id string) string {
	b, _ := os.ReadFile(filepath.Join(e.home, "runs", id, "attempts", "1", "agent.log"))
	return string(b)
}

// runIDs lists the run directories that exist.
func (e *env) runIDs() []string {
	ents, _ := os.ReadDir(filepath.Join(e.home, "runs"))
	var ids []string
	for _, d := range ents {
		if d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			ids = append(ids, d.Name())
		}
	}
	return ids
}

// stopAll cancels whatever runs are still active when a test ends.
func (e *env) stopAll() {
	for _, id := range e.runIDs() {
		r, err := e.store().Get(context.Background(), id)
		if err == nil && r.State.Active() {
			e.agentrun(nil, "cancel", id)
		}
	}
	// A detached supervisor may still be writing its last events after the
	// run's state is final: wait until every one has let go of its lock, so
	// the temp dir is not removed under it.
	deadline := time.Now().Add(15 * time.Second)
	for _, id := range e.runIDs() {
		e.releasedBy(id, deadline)
	}
}

// released waits (up to 15 s) until no supervisor holds run id's lock.
func (e *env) released(id string) { e.releasedBy(id, time.Now().Add(15*time.Second)) }

func (e *env) releasedBy(id string, deadline time.Time) {
	for time.Now().Before(deadline) {
		held, err := flock.New(e.home).Held(context.Background(), id)
		if err != nil || !held {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

func must(t testing.TB, res result, code int) {
	t.Helper()
	if res.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.code, code, res.stdout, res.stderr)
	}
}

func sh(s string) string { return fmt.Sprintf("%q", s) }
