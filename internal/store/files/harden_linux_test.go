package files_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// within runs fn and fails the test if it has not returned after d (a
// read that blocks on a FIFO would hang forever).
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// TestRunJSONNotARegularFile: a run.json that is a directory, a FIFO, a
// symlink (even to a valid record) or unreadable is a damaged record: Get
// says ErrCorrupt at once (never blocks on the FIFO), List names it broken
// beside the others, and Delete removes it.
func TestRunJSONNotARegularFile(t *testing.T) {
	cases := map[string]func(t *testing.T, s *files.Store, id string){
		"directory": func(t *testing.T, s *files.Store, id string) {
			os.Remove(s.L.RunJSON(id))
			if err := os.Mkdir(s.L.RunJSON(id), 0o700); err != nil {
				t.Fatal(err)
			}
		},
		"fifo": func(t *testing.T, s *files.Store, id string) {
			os.Remove(s.L.RunJSON(id))
			if err := unix.Mkfifo(s.L.RunJSON(id), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"symlink": func(t *testing.T, s *files.Store, id string) {
			data, err := os.ReadFile(s.L.RunJSON(id))
			if err != nil {
				t.Fatal(err)
			}
			elsewhere := filepath.Join(t.TempDir(), "run.json")
			os.WriteFile(elsewhere, data, 0o600)
			os.Remove(s.L.RunJSON(id))
			if err := os.Symlink(elsewhere, s.L.RunJSON(id)); err != nil {
				t.Fatal(err)
			}
		},
		"unreadable": func(t *testing.T, s *files.Store, id string) {
			if os.Geteuid() == 0 {
				t.Skip("root reads a mode 000 file; this case runs as an unprivileged user")
			}
			if err := os.Chmod(s.L.RunJSON(id), 0); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			good := mustCreate(t, s, run.NewID())
			bad := mustCreate(t, s, run.NewID())
			damage(t, s, bad.ID)
			var err error
			within(t, 3*time.Second, "Get", func() { _, err = s.Get(ctx, bad.ID) })
			if !errors.Is(err, run.ErrCorrupt) || !strings.Contains(err.Error(), bad.ID) {
				t.Fatalf("Get = %v, want ErrCorrupt naming the run", err)
			}
			var runs []*run.Run
			var broken []run.Broken
			within(t, 3*time.Second, "List", func() { runs, broken, err = s.List(ctx, run.Filter{}) })
			if err != nil || len(runs) != 1 || runs[0].ID != good.ID || len(broken) != 1 || broken[0].ID != bad.ID {
				t.Fatalf("List = %v, broken %+v, %v", runs, broken, err)
			}
			within(t, 3*time.Second, "Update", func() {
				_, err = s.Update(ctx, bad.ID, func(*run.Run) error { return nil })
			})
			if !errors.Is(err, run.ErrCorrupt) {
				t.Fatalf("Update = %v, want ErrCorrupt", err)
			}
			within(t, 3*time.Second, "Delete", func() { err = s.Delete(ctx, bad.ID) })
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, err := s.Get(ctx, bad.ID); !errors.Is(err, run.ErrNotFound) {
				t.Fatalf("after Delete: %v", err)
			}
		})
	}
}

// TestUnknownStateIsDamaged: a record whose state is no known state is
// damaged, not an active run that the next command rewrites.
func TestUnknownStateIsDamaged(t *testing.T) {
	s := openStore(t)
	for _, state := range []string{"exploded", ""} {
		r := mustCreate(t, s, run.NewID())
		data, _ := os.ReadFile(s.L.RunJSON(r.ID))
		data = []byte(strings.Replace(string(data), `"status": "queued"`, `"status": "`+state+`"`, 1))
		if err := os.WriteFile(s.L.RunJSON(r.ID), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, r.ID); !errors.Is(err, run.ErrCorrupt) || !strings.Contains(err.Error(), "state") {
			t.Fatalf("state %q: Get = %v, want ErrCorrupt about the state", state, err)
		}
		_, err := s.Transition(ctx, r.ID, []run.State{run.State(state)}, run.StateInterrupted, run.ReasonInterrupted, "")
		if !errors.Is(err, run.ErrCorrupt) {
			t.Fatalf("state %q: Transition = %v, want ErrCorrupt", state, err)
		}
	}
}

// fullTmpfs mounts a small tmpfs (root only; skipped otherwise, a failure
// with AGENTRUN_REQUIRE_CAPS=1) and returns its path and functions that
// fill it to the last byte and free it again.
func fullTmpfs(t *testing.T) (dir string, fill, free func()) {
	t.Helper()
	dir = t.TempDir()
	testsupport.Tmpfs(t, dir, "1m")
	filler := filepath.Join(dir, "filler")
	return dir, func() { testsupport.FillDisk(t, filler) }, func() { os.Remove(filler) }
}

func stateEvents(t *testing.T, s *files.Store, id string) []run.Event {
	t.Helper()
	evs, err := s.Events(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []run.Event
	for _, e := range evs {
		if e.Type == run.EventState {
			out = append(out, e)
		}
	}
	return out
}

// TestTransitionOnFullDisk: when run.json cannot be written (the disk is
// full), a transition fails whole: the journal does not record it, and
// repeating it (each later command's reconcile) appends nothing either.
// Once there is room again it is recorded in both.
func TestTransitionOnFullDisk(t *testing.T) {
	home, fill, free := fullTmpfs(t)
	s, err := files.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	r := mustCreate(t, s, run.NewID())
	if _, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StateRunning, "", ""); err != nil {
		t.Fatal(err)
	}
	before := stateEvents(t, s, r.ID)
	fill()
	for i := range 3 {
		_, err := s.Transition(ctx, r.ID, []run.State{run.StateRunning}, run.StateInterrupted, run.ReasonInterrupted, "gone")
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("transition %d on a full disk: %v, want ENOSPC", i, err)
		}
		got, err := s.Get(ctx, r.ID)
		if err != nil || got.State != run.StateRunning {
			t.Fatalf("record after a failed transition: %v %v", got, err)
		}
		if evs := stateEvents(t, s, r.ID); len(evs) != len(before) {
			t.Fatalf("after %d failed transitions the journal has %d state events, the record %d: %+v",
				i+1, len(evs), len(before), evs[len(before):])
		}
	}
	free()
	if _, err := s.Transition(ctx, r.ID, []run.State{run.StateRunning}, run.StateInterrupted, run.ReasonInterrupted, "gone"); err != nil {
		t.Fatal(err)
	}
	evs := stateEvents(t, s, r.ID)
	if len(evs) != len(before)+1 || evs[len(evs)-1].State != run.StateInterrupted || evs[len(evs)-1].Seq != before[len(before)-1].Seq+1 {
		t.Fatalf("journal after room came back: %+v", evs)
	}
}
