package files_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

var ctx = context.Background()

func mustCreate(t testing.TB, s *files.Store, id string) *run.Run {
	t.Helper()
	r := &run.Run{ID: id, State: run.StateQueued, Task: "task", Repo: "/src/app"}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDamagedRunJSONAffectsOnlyItsRun(t *testing.T) {
	s := openStore(t)
	good1 := mustCreate(t, s, run.NewID())
	garbled := mustCreate(t, s, run.NewID())
	renamed := mustCreate(t, s, run.NewID())
	emptied := mustCreate(t, s, run.NewID())
	good2 := mustCreate(t, s, run.NewID())

	os.WriteFile(s.L.RunJSON(garbled.ID), []byte(`{"id":"`+garbled.ID+`","status":`), 0o600)
	os.WriteFile(s.L.RunJSON(renamed.ID), []byte(`{"id":"zzzzzzzzzz"}`), 0o600)
	os.Remove(s.L.RunJSON(emptied.ID))

	runs, broken, err := s.List(ctx, run.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != good2.ID || runs[1].ID != good1.ID {
		t.Fatalf("List runs = %v, want %s, %s", runs, good2.ID, good1.ID)
	}
	if len(broken) != 3 {
		t.Fatalf("List broken = %+v, want 3", broken)
	}
	for _, b := range broken {
		if !strings.Contains(b.Err, b.ID) {
			t.Errorf("broken %s: error %q does not name the run", b.ID, b.Err)
		}
	}
	// A filter cannot be checked against a broken run: it is reported anyway.
	_, broken, _ = s.List(ctx, run.Filter{States: []run.State{run.StateCancelled}})
	if len(broken) != 3 {
		t.Fatalf("filtered List broken = %+v, want 3", broken)
	}

	for _, id := range []string{garbled.ID, renamed.ID, emptied.ID} {
		_, err := s.Get(ctx, id)
		if !errors.Is(err, run.ErrCorrupt) || !strings.Contains(err.Error(), id) {
			t.Errorf("Get(%s) = %v, want ErrCorrupt naming the run", id, err)
		}
		_, err = s.Update(ctx, id, func(*run.Run) error { t.Error("fn called for a damaged run"); return nil })
		if !errors.Is(err, run.ErrCorrupt) {
			t.Errorf("Update(%s) = %v, want ErrCorrupt", id, err)
		}
		// A damaged run can still be found and deleted.
		if got, err := s.Resolve(ctx, id[:5]); err != nil || got != id {
			t.Errorf("Resolve(%s) = %q, %v", id[:5], got, err)
		}
		if err := s.Delete(ctx, id); err != nil {
			t.Errorf("Delete(%s): %v", id, err)
		}
	}
	if _, broken, _ := s.List(ctx, run.Filter{}); len(broken) != 0 {
		t.Fatalf("after deleting the damaged runs, broken = %+v", broken)
	}
}

func TestTornJournalLine(t *testing.T) {
	for _, size := range []int{10, 100 << 10} { // lines shorter and longer than a read chunk
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			s := openStore(t)
			r := mustCreate(t, s, run.NewID())
			big := strings.Repeat("x", size)
			for i := 0; i < 3; i++ {
				if _, err := s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, big, nil)); err != nil {
					t.Fatal(err)
				}
			}
			// A crash mid-append leaves the start of a line without its newline.
			f, err := os.OpenFile(s.L.Events(r.ID), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"seq":4,"time":"2026-01-01T00:00:00Z","type":"warn` + big[:size/2])
			f.Close()

			evs, err := s.Events(ctx, r.ID, 0)
			if err != nil || len(evs) != 3 || evs[2].Seq != 3 {
				t.Fatalf("Events with a torn last line = %d events, %v", len(evs), err)
			}
			// A new process (cold cache) appends: Seq continues after the last
			// whole line, and the torn fragment does not swallow the new event.
			s2, err := files.Open(s.L.Home)
			if err != nil {
				t.Fatal(err)
			}
			e, err := s2.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "after the crash", nil))
			if err != nil || e.Seq != 4 {
				t.Fatalf("append after a torn line: Seq %d, %v; want 4", e.Seq, err)
			}
			// The process that appended before the crash also notices.
			e, err = s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "and again", nil))
			if err != nil || e.Seq != 5 {
				t.Fatalf("second append: Seq %d, %v; want 5", e.Seq, err)
			}
			evs, err = s.Events(ctx, r.ID, 3)
			if err != nil || len(evs) != 2 || evs[0].Message != "after the crash" || evs[1].Seq != 5 {
				t.Fatalf("Events(after 3) = %+v, %v", evs, err)
			}
		})
	}
}

func TestJournalDamagedLinesInTheMiddle(t *testing.T) {
	s := openStore(t)
	r := mustCreate(t, s, run.NewID())
	lines := `{"seq":1,"time":"2026-01-01T00:00:00Z","type":"warning"}` + "\n" +
		`not json at all` + "\n" +
		`{"seq":2,"time":"2026-01-01T00:00:00Z","type":"warning"}` + "\n" +
		`{"seq":3,"ti` + "\n" // a torn line that a later append terminated
	os.WriteFile(s.L.Events(r.ID), []byte(lines), 0o600)
	evs, err := s.Events(ctx, r.ID, 0)
	if err != nil || len(evs) != 2 || evs[1].Seq != 2 {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
	e, err := s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "", nil))
	if err != nil || e.Seq != 3 {
		t.Fatalf("append: Seq %d, %v; want 3", e.Seq, err)
	}
}

func TestCreateLeftoversAreIgnoredAndSwept(t *testing.T) {
	s := openStore(t)
	id := run.NewID()
	// What a crash in the middle of Create leaves: a scratch directory
	// holding a complete-looking record of the run.
	stale := filepath.Join(s.L.Runs(), ".tmp-"+id+"-0123456789ab")
	fresh := filepath.Join(s.L.Runs(), ".tmp-"+id+"-ba9876543210")
	deleting := filepath.Join(s.L.Runs(), ".del-"+id+"-aaaaaaaaaaaa")
	for _, d := range []string{stale, fresh, deleting} {
		os.Mkdir(d, 0o700)
		os.WriteFile(filepath.Join(d, "run.json"), []byte(`{"id":"`+id+`","seq":1,"status":"queued"}`), 0o600)
	}
	os.WriteFile(filepath.Join(s.L.Runs(), "stray-file"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(s.L.Runs(), "NOTANID"), 0o700)

	runs, broken, err := s.List(ctx, run.Filter{})
	if err != nil || len(runs) != 0 || len(broken) != 0 {
		t.Fatalf("List = %v, %v, %v; want nothing", runs, broken, err)
	}
	if _, err := s.Resolve(ctx, id[:4]); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("Resolve found a half-made run: %v", err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("Get found a half-made run: %v", err)
	}
	mustCreate(t, s, id)
	if runs, _, _ := s.List(ctx, run.Filter{}); len(runs) != 1 {
		t.Fatalf("List after Create = %v", runs)
	}

	// Open removes scratch directories older than an hour, and only those.
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(stale, old, old)
	os.Chtimes(deleting, old, old)
	if _, err := files.Open(s.L.Home); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{stale: false, deleting: false, fresh: true, s.RunDir(id): true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}

func TestSeqCounterSurvivesLossAndDamage(t *testing.T) {
	s := openStore(t)
	var last int64
	for i := 0; i < 3; i++ {
		last = mustCreate(t, s, run.NewID()).Seq
	}
	for _, damage := range []func(){
		func() { os.Remove(s.L.Seq()) },
		func() { os.WriteFile(s.L.Seq(), []byte("garbage that is long\n"), 0o600) },
		func() { os.WriteFile(s.L.Seq(), nil, 0o600) },
		func() { os.WriteFile(s.L.Seq(), []byte("-5"), 0o600) },
	} {
		damage()
		r := mustCreate(t, s, run.NewID())
		if r.Seq <= last {
			t.Fatalf("after damage to the counter Seq %d <= %d", r.Seq, last)
		}
		last = r.Seq
	}
	if b, _ := os.ReadFile(s.L.Seq()); strings.TrimSpace(string(b)) != fmt.Sprint(last) {
		t.Fatalf("counter file holds %q, want %d", b, last)
	}
}

func TestRunDir(t *testing.T) {
	s := openStore(t)
	r := mustCreate(t, s, run.NewID())
	if got, want := s.RunDir(r.ID), filepath.Join(s.L.Home, "runs", r.ID); got != want {
		t.Fatalf("RunDir = %s, want %s", got, want)
	}
	if fi, err := os.Stat(s.L.RunJSON(r.ID)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("run.json: %v mode %v, want 0600", err, fi.Mode())
	}
	if fi, err := os.Stat(s.RunDir(r.ID)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("run dir: %v mode %v, want 0700", err, fi.Mode())
	}
}
