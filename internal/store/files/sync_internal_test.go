package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// fsyncs replaces syncFile for a test: each fsync is recorded by the base
// name of its file, and hook (when set) may block it or fail it.
type fsyncs struct {
	mu    sync.Mutex
	names []string
	hook  func(name string) error
}

func watchFsyncs(t *testing.T) *fsyncs {
	t.Helper()
	w := &fsyncs{}
	orig := syncFile
	syncFile = func(f *os.File) error {
		name := filepath.Base(f.Name())
		w.mu.Lock()
		w.names = append(w.names, name)
		hook := w.hook
		w.mu.Unlock()
		if hook != nil {
			if err := hook(name); err != nil {
				return err
			}
		}
		return orig(f)
	}
	t.Cleanup(func() { syncFile = orig })
	return w
}

func (w *fsyncs) setHook(h func(name string) error) {
	w.mu.Lock()
	w.hook = h
	w.mu.Unlock()
}

// take returns the names fsynced since the last take.
func (w *fsyncs) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.names
	w.names = nil
	return n
}

func count(names []string, name string) int {
	n := 0
	for _, x := range names {
		if x == name {
			n++
		}
	}
	return n
}

func newRun(t *testing.T) (*Store, *run.Run) {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "task", Repo: "/src/app"}
	if err := s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return s, r
}

// TestLazyAppend: a lazy append is in the journal at once, for every
// reader, without an fsync of its own; the next state event's fsync
// covers it; with no state event to come, it is fsynced within lazySync.
func TestLazyAppend(t *testing.T) {
	ctx := context.Background()
	w := watchFsyncs(t)
	s, r := newRun(t)
	lazySync = time.Hour // the timer stays out of this part
	w.take()
	for _, msg := range []string{"sandbox started", "attempt 1 started"} {
		if _, err := s.AppendEventLazy(ctx, r.ID, run.NewEvent(run.EventSandbox, msg, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.take(); len(got) != 0 {
		t.Fatalf("lazy appends fsynced %v", got)
	}
	other, _ := Open(s.L.Home) // another process's view
	if evs, err := other.Events(ctx, r.ID, 0); err != nil || len(evs) != 2 || evs[1].Seq != 2 || evs[1].Message != "attempt 1 started" {
		t.Fatalf("journal after two lazy appends: %+v %v", evs, err)
	}
	if _, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", ""); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); count(got, "events.jsonl") != 1 {
		t.Fatalf("the transition fsynced %v, want the journal once (it covers the lazy lines)", got)
	}
	if evs, _ := other.Events(ctx, r.ID, 0); len(evs) != 3 || evs[2].State != run.StatePreparing || evs[2].Seq != 3 {
		t.Fatalf("journal after the transition: %+v", evs)
	}

	// Another run (the first one's timer waits its hour).
	lazySync = 20 * time.Millisecond
	t.Cleanup(func() { lazySync = time.Second })
	s2, r2 := newRun(t)
	w.take()
	if _, err := s2.AppendEventLazy(ctx, r2.ID, run.NewEvent(run.EventWarning, "last", nil)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count(w.take(), "events.jsonl") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a lazy line with no state event after it was never fsynced")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTransitionStoresOnlyOnceJournaled: the record's fsync runs beside
// the journal's, but run.json is replaced only once the state event is
// durable: while the journal's fsync is held, a reader still sees the old
// state; a failed journal fsync fails the transition, leaves run.json as
// it was and takes the event back.
func TestTransitionStoresOnlyOnceJournaled(t *testing.T) {
	ctx := context.Background()
	w := watchFsyncs(t)
	s, r := newRun(t)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	w.setHook(func(name string) error {
		if name == "events.jsonl" {
			held <- struct{}{}
			<-release
		}
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", "")
		done <- err
	}()
	<-held
	// The record's temp file is fsynced meanwhile; the record stays.
	deadline := time.Now().Add(5 * time.Second)
	for !hasTempRecord(t, s.RunDir(r.ID)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got, err := (&Store{L: s.L}).Get(ctx, r.ID); err != nil || got.State != run.StateQueued {
		t.Fatalf("while the state event's fsync is held the record says %v (%v)", got.State, err)
	}
	w.setHook(nil)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, r.ID); got.State != run.StatePreparing {
		t.Fatalf("after the fsync: %s", got.State)
	}

	w.setHook(func(name string) error {
		if name == "events.jsonl" {
			return syscall.EIO
		}
		return nil
	})
	_, err := s.Transition(ctx, r.ID, []run.State{run.StatePreparing}, run.StateRunning, "", "")
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("transition with a failing journal fsync: %v, want EIO", err)
	}
	w.setHook(nil)
	if got, _ := s.Get(ctx, r.ID); got.State != run.StatePreparing || got.Version != 2 {
		t.Fatalf("record after the failed transition: %s v%d", got.State, got.Version)
	}
	evs, _ := s.Events(ctx, r.ID, 0)
	if len(evs) != 1 || evs[0].State != run.StatePreparing {
		t.Fatalf("journal after the failed transition: %+v", evs)
	}
	if hasTempRecord(t, s.RunDir(r.ID)) {
		t.Fatal("the failed transition left its temp record")
	}
	if _, err := s.Transition(ctx, r.ID, []run.State{run.StatePreparing}, run.StateRunning, "", ""); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events(ctx, r.ID, 0); len(evs) != 2 || evs[1].Seq != 2 || evs[1].State != run.StateRunning {
		t.Fatalf("journal after the retry: %+v", evs)
	}
}

func hasTempRecord(t *testing.T, dir string) bool {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".run.json.tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m) > 0
}

// TestCreateWaitsForItsFsyncs: Create makes the record, the scratch
// directory and the submission counter durable (side by side) before the
// run's directory goes into place; a failure of any of them creates no
// run and leaves nothing behind.
func TestCreateWaitsForItsFsyncs(t *testing.T) {
	ctx := context.Background()
	w := watchFsyncs(t)
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "task", Repo: "/src/app"}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got := w.take()
	for _, name := range []string{"seq", "run.json", "runs"} {
		if count(got, name) != 1 {
			t.Fatalf("Create fsynced %v, want %s once", got, name)
		}
	}
	if got[len(got)-1] != "runs" {
		t.Fatalf("Create fsynced %v: the runs directory (the rename) last", got)
	}
	for _, failing := range []string{"seq", "run.json"} {
		w.setHook(func(name string) error {
			if name == failing {
				return syscall.EIO
			}
			return nil
		})
		r := &run.Run{ID: run.NewID(), State: run.StateQueued, Task: "task", Repo: "/src/app"}
		if err := s.Create(ctx, r); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Create with a failing fsync of %s: %v, want EIO", failing, err)
		}
		w.setHook(nil)
		if _, err := os.Lstat(s.RunDir(r.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a failed Create (%s) left its run: %v", failing, err)
		}
		if left, _ := filepath.Glob(filepath.Join(s.L.Runs(), tmpPrefix+"*")); len(left) != 0 {
			t.Fatalf("a failed Create (%s) left %v", failing, left)
		}
	}
}

// TestActiveMovesSkipTheDirectoryFsync: a move to an active state fsyncs
// its journal line and its new record, and renames the record into place
// (every reader sees it at once), without the directory's fsync; a move
// to a terminal state and an Update fsync the directory after the rename,
// as its last fsync.
func TestActiveMovesSkipTheDirectoryFsync(t *testing.T) {
	ctx := context.Background()
	w := watchFsyncs(t)
	s, r := newRun(t)
	other, _ := Open(s.L.Home)            // another process's view
	records := func(names []string) int { // the new records fsynced
		n := 0
		for _, name := range names {
			if strings.HasPrefix(name, ".run.json.tmp-") {
				n++
			}
		}
		return n
	}
	step := func(from, to run.State, durable bool) {
		t.Helper()
		w.take()
		if _, err := s.Transition(ctx, r.ID, []run.State{from}, to, "", ""); err != nil {
			t.Fatal(err)
		}
		got := w.take()
		if count(got, "events.jsonl") != 1 || records(got) != 1 {
			t.Fatalf("%s -> %s fsynced %v, want the journal and the new record once each", from, to, got)
		}
		switch dirs := count(got, r.ID); {
		case durable && (dirs != 1 || got[len(got)-1] != r.ID):
			t.Fatalf("%s -> %s fsynced %v, want the run's directory last", from, to, got)
		case !durable && dirs != 0:
			t.Fatalf("%s -> %s fsynced %v, want no fsync of the run's directory", from, to, got)
		}
		if cur, err := other.Get(ctx, r.ID); err != nil || cur.State != to {
			t.Fatalf("after %s -> %s another reader sees %+v, %v", from, to, cur, err)
		}
	}
	step(run.StateQueued, run.StatePreparing, false)
	step(run.StatePreparing, run.StateRunning, false)
	step(run.StateRunning, run.StateChecking, false)
	step(run.StateChecking, run.StateExporting, false)
	step(run.StateExporting, run.StateInterrupted, true)
	step(run.StateInterrupted, run.StateQueued, false) // a resume
	step(run.StateQueued, run.StatePreparing, false)
	step(run.StatePreparing, run.StateSucceeded, true)

	w.take()
	if _, err := s.Update(ctx, r.ID, func(r *run.Run) error { r.Branch = "agentrun/x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := w.take(); records(got) != 1 || count(got, r.ID) != 1 || got[len(got)-1] != r.ID {
		t.Fatalf("Update fsynced %v, want the new record, then the run's directory", got)
	}
}
