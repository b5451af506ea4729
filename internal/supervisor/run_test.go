package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/testsupport"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/store/files"
)

// gitRepo makes a real repository with one commit.
func gitRepo(t *testing.T) string {
	dir, _ := testsupport.Repo(t, nil)
	return dir
}

// inProcess plans and stores a run and returns a Supervisor for it, run in
// this process (so the race detector sees the whole flow).
func inProcess(t *testing.T, agentCmd string, checks []run.CheckSpec) (*Supervisor, *files.Store) {
	t.Helper()
	st, l := newStore(t)
	ctx := context.Background()
	svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}}
	r, _, err := svc.Plan(ctx, submit.Request{Repo: gitRepo(t), Task: "write a file\n\ndetails", AgentCmd: agentCmd, Checks: checks,
		Attempts: 2, Timeout: time.Minute, Sandbox: "host",
		Export: run.ExportConfig{MaxFiles: 100, MaxBytes: 1 << 20, AuthorName: "T", AuthorEmail: "t@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	lk, err := flock.New(l.Home).Acquire(context.Background(), r.ID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Release() })
	return &Supervisor{Deps: testDeps(st, l), ID: r.ID, MaxParallel: 1, Lease: lk}, st
}

func TestRunInProcess(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", []run.CheckSpec{{Name: "hi", Command: "test -f hi.txt"}})
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := st.Get(context.Background(), s.ID)
	if r.State != run.StateSucceeded || r.Commit == "" || r.Result == nil || r.Result.FilesChanged != 1 {
		t.Fatalf("%s %s %+v", r.State, r.Message, r.Result)
	}
	if r.Supervisor != nil || r.Provenance.Enforced == nil {
		t.Fatalf("supervisor %+v enforced %v", r.Supervisor, r.Provenance.Enforced)
	}
	if _, err := os.Stat(filepath.Join(s.Layout.RunDir(s.ID), "sandbox")); err == nil {
		// Destroy removes the backend's state.
		ents, _ := os.ReadDir(filepath.Join(s.Layout.RunDir(s.ID), "sandbox"))
		if len(ents) > 0 {
			t.Fatalf("sandbox state left: %v", ents)
		}
	}
}

// orderedBackend is the host backend whose sandboxes note the run's
// state in the store when they are stopped and when they are destroyed.
type orderedBackend struct {
	sandbox.Backend
	st *files.Store
	id string

	mu    sync.Mutex
	calls []string // "stop <state>", "destroy <state>"
}

func (b *orderedBackend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &orderedSandbox{Sandbox: sb, b: b}, nil
}

func (b *orderedBackend) note(what string) {
	r, err := b.st.Get(context.Background(), b.id)
	state := "?"
	if err == nil {
		state = string(r.State)
	}
	b.mu.Lock()
	b.calls = append(b.calls, what+" "+state)
	b.mu.Unlock()
}

type orderedSandbox struct {
	sandbox.Sandbox
	b *orderedBackend
}

func (s *orderedSandbox) Stop(ctx context.Context) error {
	s.b.note("stop")
	return s.Sandbox.Stop(ctx)
}

func (s *orderedSandbox) Destroy(ctx context.Context) error {
	s.b.note("destroy")
	return s.Sandbox.Destroy(ctx)
}

// TestRunStopsThenDestroysAfterTheEnd: the sandbox is stopped before the
// export (nothing runs in it while the workspace is read) and destroyed
// only once the run's end is stored (its teardown, a file system's sync
// for the native sandbox, holds up neither), once, before Run returns.
func TestRunStopsThenDestroysAfterTheEnd(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", nil)
	b := &orderedBackend{Backend: host.New(), st: st, id: s.ID}
	s.Backends = map[string]sandbox.Backend{"host": b}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	calls := strings.Join(b.calls, ", ")
	b.mu.Unlock()
	if want := "stop running, destroy succeeded"; calls != want {
		t.Fatalf("sandbox calls: %s, want %s", calls, want)
	}
	if ents, _ := os.ReadDir(s.Layout.SandboxState(s.ID)); len(ents) > 0 {
		t.Fatalf("sandbox state left after Run: %v", ents)
	}
}

func TestRunInProcessCancelRequested(t *testing.T) {
	s, st := inProcess(t, "sleep 60", nil)
	ctx := context.Background()
	done := runUntilRunning(t, s, st)
	// No signal (it would reach this test process): the supervisor's
	// watcher sees the request.
	if _, err := st.Update(ctx, s.ID, func(r *run.Run) error { r.CancelRequested = true; return nil }); err != nil {
		t.Fatal(err)
	}
	awaitStop(t, done, "supervisor did not stop")
	r, _ := st.Get(ctx, s.ID)
	if r.State != run.StateCancelled || r.Attempts[0].Outcome != run.ReasonCancelled {
		t.Fatalf("%s, attempt %+v", r.State, r.Attempts[0])
	}
}

// runUntilRunning runs s in the background and returns once its run is
// running its first attempt; the channel gives Run's error.
func runUntilRunning(t *testing.T, s *Supervisor, st *files.Store) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, _ := st.Get(context.Background(), s.ID)
		if r.State == run.StateRunning && len(r.Attempts) == 1 {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatal("never running")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitStop waits up to 20 s for Run to return (without error), failing
// with msg if it does not.
func awaitStop(t *testing.T, done <-chan error, msg string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal(msg)
	}
}

// readCounter counts the reads of the run while it is running.
type readCounter struct {
	run.Store
	mu      sync.Mutex
	running int
}

func (c *readCounter) Get(ctx context.Context, id string) (*run.Run, error) {
	r, err := c.Store.Get(ctx, id)
	if err == nil && r.State == run.StateRunning {
		c.mu.Lock()
		c.running++
		c.mu.Unlock()
	}
	return r, err
}

func (c *readCounter) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// TestRunInProcessCancelledRereadsSeldom: a supervisor told of a cancel
// through Cancelled (an agent host, whose every reread is a request to
// the server) rereads the run only as a backup: at most once while an
// agent works 1.5 s (every cancelPoll it would be 7 times); without
// Cancelled it rereads every cancelPoll. Closing Cancelled then ends
// the next run cancelled at once.
func TestRunInProcessCancelledRereadsSeldom(t *testing.T) {
	for _, told := range []bool{true, false} {
		s, _ := inProcess(t, "sleep 1.5; echo hi > hi.txt", nil)
		c := &readCounter{Store: s.Store}
		s.Store = c
		if told {
			s.Cancelled = make(chan struct{})
		}
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := c.reads()
		t.Logf("Cancelled set %v: %d rereads while running", told, n)
		if told && n > 1 {
			t.Fatalf("%d rereads of the run while the agent worked 1.5 s, with Cancelled set", n)
		}
		if !told && n < 3 {
			t.Fatalf("control: %d rereads of the run while the agent worked 1.5 s, without Cancelled", n)
		}
	}

	s, st := inProcess(t, "sleep 60", nil)
	cancelled := make(chan struct{})
	s.Cancelled = cancelled
	done := runUntilRunning(t, s, st)
	close(cancelled)
	awaitStop(t, done, "the supervisor did not stop when Cancelled closed")
	if r, _ := st.Get(context.Background(), s.ID); r.State != run.StateCancelled {
		t.Fatalf("after Cancelled closed the run is %s: %s", r.State, r.Message)
	}
}

func TestRunInProcessStopSignalInterrupts(t *testing.T) {
	s, st := inProcess(t, "sleep 60", nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for {
		r, _ := st.Get(context.Background(), s.ID)
		if r.State == run.StateRunning && len(r.Attempts) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel(errStopSignal) // what SIGTERM without a cancel request does
	<-done
	r, _ := st.Get(context.Background(), s.ID)
	if r.State != run.StateInterrupted {
		t.Fatalf("%s", r.State)
	}
}

type panicAgent struct{}

func (panicAgent) Attempt(context.Context, agent.AttemptInput) (*agent.Outcome, error) {
	panic("agent bug")
}

func TestPanicEndsRunFailedInternal(t *testing.T) {
	s, st := inProcess(t, "true", nil)
	s.NewAgent = func(*run.Run, func(string) string, func(string), *agent.Gateway) (agent.Agent, error) {
		return panicAgent{}, nil
	}
	if err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "agent bug") {
		t.Fatalf("err %v", err)
	}
	r, _ := st.Get(context.Background(), s.ID)
	if r.State != run.StateFailed || r.Reason != run.ReasonInternal || r.Supervisor != nil {
		t.Fatalf("%s/%s supervisor %+v", r.State, r.Reason, r.Supervisor)
	}
}

// TestRunRemakesHalfMadeWorkspace: a workspace directory without a manifest
// (a supervisor killed while making it) never had an agent: the next
// supervisor empties it and makes it again, and the run succeeds. An empty
// directory (killed right after making it) is filled.
func TestRunRemakesHalfMadeWorkspace(t *testing.T) {
	for _, junk := range []bool{true, false} {
		s, st := inProcess(t, "echo hi > hi.txt", nil)
		dir := s.Layout.Workspace(s.ID)
		if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		if !junk {
			_ = os.Remove(filepath.Join(dir, ".git"))
		} else if err := os.WriteFile(filepath.Join(dir, "half.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		r, _ := st.Get(context.Background(), s.ID)
		if r.State != run.StateSucceeded || r.Result == nil || r.Result.FilesChanged != 1 {
			t.Fatalf("junk=%v: %s %s %+v", junk, r.State, r.Message, r.Result)
		}
		if _, err := os.Stat(filepath.Join(dir, "half.txt")); err == nil {
			t.Fatal("the half-made workspace was kept")
		}
	}
}

// aheadBackend is the host backend with a sandbox.Prewarmer that records
// its call.
type aheadBackend struct {
	sandbox.Backend
	mu           sync.Mutex
	ctx          context.Context // Prewarm's
	startedAfter bool            // Start came after Prewarm
}

func (b *aheadBackend) Prewarm(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ctx = ctx
}

func (b *aheadBackend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.mu.Lock()
	b.startedAfter = b.ctx != nil
	b.mu.Unlock()
	return b.Backend.Start(ctx, spec)
}

// A backend that can start part of a sandbox ahead is told to before the
// sandbox starts, for the run's life: what no sandbox took ends with it.
// Another backend gives up what it started ahead (with an ended context).
func TestRunPrewarmsTheBackend(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", nil)
	b := &aheadBackend{Backend: host.New()}
	other := &aheadBackend{Backend: host.New()} // one the run does not use
	s.Backends = map[string]sandbox.Backend{"host": b, "other": other}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(context.Background(), s.ID); r.State != run.StateSucceeded {
		t.Fatalf("%s %s", r.State, r.Message)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil || !b.startedAfter {
		t.Fatalf("prewarmed %v, started after %v", b.ctx != nil, b.startedAfter)
	}
	if b.ctx.Err() == nil {
		t.Fatal("the context Prewarm got outlives the run")
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if other.ctx == nil || other.ctx.Err() == nil || other.startedAfter {
		t.Fatal("the backend the run does not use was not told to give up what it started ahead")
	}
}

// heldRunning is a run store whose move to running waits until ready
// holds (at most a while), as a team server's round trip makes it wait;
// readyThen says whether it held when the move went.
type heldRunning struct {
	run.Store
	ready     func() bool
	readyThen atomic.Bool
}

func (h *heldRunning) TransitionWith(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string, fn func(*run.Run) error) (*run.Run, error) {
	if to == run.StateRunning {
		for deadline := time.Now().Add(10 * time.Second); !h.ready() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		h.readyThen.Store(h.ready())
	}
	return h.Store.TransitionWith(ctx, id, from, to, reason, msg, fn)
}

// TestAttemptFilesWhileRunningIsRecorded: an attempt's directory, prompt
// and log are written while its move to running is recorded, not after
// it, on the way to the agent's start; the attempt then runs as before.
func TestAttemptFilesWhileRunningIsRecorded(t *testing.T) {
	s, st := inProcess(t, "echo hi > hi.txt", nil)
	h := &heldRunning{Store: st, ready: func() bool {
		_, err := os.Stat(s.Layout.AgentLog(s.ID, 1))
		return err == nil
	}}
	s.Store = h
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !h.readyThen.Load() {
		t.Error("the attempt's log was not made while its move to running was recorded")
	}
	r, _ := st.Get(context.Background(), s.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 1 {
		t.Fatalf("%s %s, attempts %+v", r.State, r.Message, r.Attempts)
	}
	if b, err := os.ReadFile(s.Layout.Prompt(s.ID, 1)); err != nil || !strings.Contains(string(b), "write a file") {
		t.Errorf("prompt: %q %v", b, err)
	}
}

// TestRunPreparesHomeBeforeTheFirstAttempt: Deps.PrepareHome fills a new
// run's HOME while its resources start; the first attempt waits for it,
// and what it did is journaled before the attempt starts.
func TestRunPreparesHomeBeforeTheFirstAttempt(t *testing.T) {
	s, st := inProcess(t, `cat "$HOME/prepared" > seen.txt`, []run.CheckSpec{{Name: "seen", Command: "grep -q yes seen.txt"}})
	var calls atomic.Int32
	s.PrepareHome = func(r *run.Run, hostHome, templates string) *run.Event {
		calls.Add(1)
		if hostHome != s.Layout.SandboxHome(r.ID) || templates != s.Layout.AgentHomes() || len(r.Attempts) != 0 {
			t.Errorf("PrepareHome(%s, %s, %d attempts)", hostHome, templates, len(r.Attempts))
		}
		time.Sleep(100 * time.Millisecond) // longer than the resources take
		if err := os.MkdirAll(hostHome, 0o700); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(filepath.Join(hostHome, "prepared"), []byte("yes\n"), 0o600); err != nil {
			t.Error(err)
		}
		ev := run.NewEvent(run.EventHome, "HOME prepared", map[string]any{"kind": "template"})
		return &ev
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := st.Get(context.Background(), s.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 1 || calls.Load() != 1 {
		t.Fatalf("%s %s, %d attempts, %d calls", r.State, r.Message, len(r.Attempts), calls.Load())
	}
	evs, err := st.Events(context.Background(), s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range evs {
		if e.Type == run.EventHome || e.Type == run.EventAttempt {
			order = append(order, e.Type)
		}
	}
	if strings.Join(order, " ") != "home attempt" {
		t.Fatalf("events %v", order)
	}
}
