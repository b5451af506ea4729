package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Run exercises every method of run.Store on stores made by newStore (one
// fresh, empty store per subtest).
func Run(t *testing.T, newStore func(t *testing.T) run.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s run.Store)
	}{
		{"CreateGetRoundTrip", testRoundTrip},
		{"CreateDefaults", testCreateDefaults},
		{"CreateSeqMonotonic", testSeqMonotonic},
		{"CreateExists", testCreateExists},
		{"BadIDs", testBadIDs},
		{"NotFound", testNotFound},
		{"Resolve", testResolve},
		{"ListOrderAndFilters", testList},
		{"Update", testUpdate},
		{"UpdateConcurrent", testUpdateConcurrent},
		{"Transition", testTransition},
		{"TransitionTimes", testTransitionTimes},
		{"TransitionRace", testTransitionRace},
		{"TransitionWith", testTransitionWith},
		{"Events", testEvents},
		{"EventsConcurrent", testEventsConcurrent},
		{"Delete", testDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

var ctx = context.Background()

// create stores a minimal queued run and returns it.
func create(t *testing.T, s run.Store, id string, mod func(r *run.Run)) *run.Run {
	t.Helper()
	r := &run.Run{ID: id, State: run.StateQueued, Task: "task " + id, Repo: "/src/app",
		Branch: run.BranchName(id), MaxAttempts: 1}
	if mod != nil {
		mod(r)
	}
	if err := s.Create(ctx, r); err != nil {
		t.Fatalf("Create %s: %v", id, err)
	}
	return r
}

func get(t *testing.T, s run.Store, id string) *run.Run {
	t.Helper()
	r, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return r
}

func requireIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func testRoundTrip(t *testing.T, s run.Store) {
	id := run.NewID()
	want := FullRun(id)
	r := FullRun(id)
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	requireFilled(t, r)
	if r.Seq <= 0 || r.Version != 1 {
		t.Fatalf("Create set Seq %d Version %d, want Seq > 0 and Version 1", r.Seq, r.Version)
	}
	want.Seq, want.Version = r.Seq, 1
	requireSameRun(t, want, r) // Create keeps what it was given
	got := get(t, s, id)
	requireSameRun(t, want, got)

	// The stored record is not shared with the caller's value.
	got.Task = "changed"
	got.Checks[0].Name = "changed"
	requireSameRun(t, want, get(t, s, id))
}

func testCreateDefaults(t *testing.T, s run.Store) {
	before := time.Now().Add(-time.Second)
	r := create(t, s, run.NewID(), func(r *run.Run) { r.Version = 7; r.Seq = 99999 })
	if r.Version != 1 {
		t.Errorf("Version = %d, want 1 whatever the caller set", r.Version)
	}
	if r.CreatedAt.Before(before) || r.UpdatedAt.Before(before) {
		t.Errorf("CreatedAt %v UpdatedAt %v: want set to now", r.CreatedAt, r.UpdatedAt)
	}
	got := get(t, s, r.ID)
	if !got.CreatedAt.Equal(r.CreatedAt) || got.Seq != r.Seq || got.Version != 1 {
		t.Errorf("stored %v/%d/%d, Create reported %v/%d/1", got.CreatedAt, got.Seq, got.Version, r.CreatedAt, r.Seq)
	}
}

func testSeqMonotonic(t *testing.T, s run.Store) {
	var last int64
	for i := 0; i < 5; i++ {
		r := create(t, s, run.NewID(), nil)
		if r.Seq <= last {
			t.Fatalf("run %d got Seq %d after %d: want strictly increasing", i, r.Seq, last)
		}
		last = r.Seq
	}
	// Concurrent creates get distinct numbers.
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &run.Run{ID: run.NewID(), State: run.StateQueued}
			if err := s.Create(ctx, r); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[r.Seq] || r.Seq <= last {
				t.Errorf("concurrent Create got Seq %d (seen: %v, last %d)", r.Seq, seen[r.Seq], last)
			}
			seen[r.Seq] = true
		}()
	}
	wg.Wait()
}

func testCreateExists(t *testing.T, s run.Store) {
	first := create(t, s, run.NewID(), nil)
	again := &run.Run{ID: first.ID, State: run.StateFailed, Task: "other"}
	requireIs(t, "second Create", s.Create(ctx, again), run.ErrExists)
	got := get(t, s, first.ID)
	if got.Task != first.Task || got.State != run.StateQueued || got.Version != 1 {
		t.Fatalf("a refused Create changed the run: %+v", got)
	}

	// Racing creates of one id: exactly one wins.
	id := run.NewID()
	var wins, exists int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Create(ctx, &run.Run{ID: id, State: run.StateQueued})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, run.ErrExists):
				exists++
			default:
				t.Errorf("racing Create: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || exists != 5 {
		t.Fatalf("racing creates: %d won, %d ErrExists; want 1 and 5", wins, exists)
	}
}

// badIDs are malformed full ids; none may ever reach storage.
var badIDs = []string{"", "../../etc", "..", ".", "/etc/passwd", "abc/defghj", "abcdefghj/",
	"ABCDEFGHJK", "abcdefghjk0", "abcdefghj", "abcdefghi\x00", "abcdefghil", "abc def gh",
	"..\\..\\abc", ".tmp-abcde", "abcdéfghj"}

func testBadIDs(t *testing.T, s run.Store) {
	good := create(t, s, run.NewID(), nil)
	for _, id := range badIDs {
		requireIs(t, fmt.Sprintf("Create(%q)", id), s.Create(ctx, &run.Run{ID: id, State: run.StateQueued}), run.ErrBadID)
		_, err := s.Get(ctx, id)
		requireIs(t, fmt.Sprintf("Get(%q)", id), err, run.ErrBadID)
		_, err = s.Update(ctx, id, func(*run.Run) error { return nil })
		requireIs(t, fmt.Sprintf("Update(%q)", id), err, run.ErrBadID)
		_, err = s.Transition(ctx, id, []run.State{run.StateQueued}, run.StateRunning, "", "")
		requireIs(t, fmt.Sprintf("Transition(%q)", id), err, run.ErrBadID)
		_, err = s.AppendEvent(ctx, id, run.NewEvent(run.EventWarning, "x", nil))
		requireIs(t, fmt.Sprintf("AppendEvent(%q)", id), err, run.ErrBadID)
		_, err = s.Events(ctx, id, 0)
		requireIs(t, fmt.Sprintf("Events(%q)", id), err, run.ErrBadID)
		requireIs(t, fmt.Sprintf("Delete(%q)", id), s.Delete(ctx, id), run.ErrBadID)
	}
	runs, broken, err := s.List(ctx, run.Filter{})
	if err != nil || len(runs) != 1 || runs[0].ID != good.ID || len(broken) != 0 {
		t.Fatalf("after bad ids List = %v, %v, %v; want only %s", runs, broken, err, good.ID)
	}
}

func testNotFound(t *testing.T, s run.Store) {
	create(t, s, run.NewID(), nil)
	id := run.NewID()
	_, err := s.Get(ctx, id)
	requireIs(t, "Get", err, run.ErrNotFound)
	_, err = s.Update(ctx, id, func(*run.Run) error { t.Error("fn called for a missing run"); return nil })
	requireIs(t, "Update", err, run.ErrNotFound)
	_, err = s.Transition(ctx, id, []run.State{run.StateQueued}, run.StateRunning, "", "")
	requireIs(t, "Transition", err, run.ErrNotFound)
	_, err = s.AppendEvent(ctx, id, run.NewEvent(run.EventWarning, "x", nil))
	requireIs(t, "AppendEvent", err, run.ErrNotFound)
	_, err = s.Events(ctx, id, 0)
	requireIs(t, "Events", err, run.ErrNotFound)
	requireIs(t, "Delete", s.Delete(ctx, id), run.ErrNotFound)
	if _, err := s.Get(ctx, id); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("operations on a missing run created it: Get = %v", err)
	}
}

func testResolve(t *testing.T, s run.Store) {
	for _, id := range []string{"aaa0000001", "aaa0000002", "bbb0000001", "bbb1000000"} {
		create(t, s, id, nil)
	}
	for _, tc := range []struct {
		prefix, want string
		err          error
	}{
		{"aaa0000001", "aaa0000001", nil},
		{"aaa00000", "", run.ErrAmbiguous},
		{"aaa", "", run.ErrAmbiguous},
		{"bbb0", "bbb0000001", nil},
		{"bbb1", "bbb1000000", nil},
		{"ccc", "", run.ErrNotFound},
		{"aaa0000003", "", run.ErrNotFound},
		{"aa", "", run.ErrBadID},
		{"", "", run.ErrBadID},
		{"AAA", "", run.ErrBadID},
		{"../../etc", "", run.ErrBadID},
		{"aaa/", "", run.ErrBadID},
		{"..", "", run.ErrBadID},
		{"aaa0000001x", "", run.ErrBadID},
		{"aa*", "", run.ErrBadID},
	} {
		got, err := s.Resolve(ctx, tc.prefix)
		if tc.err != nil {
			requireIs(t, fmt.Sprintf("Resolve(%q)", tc.prefix), err, tc.err)
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.prefix, got, err, tc.want)
		}
	}
	_, err := s.Resolve(ctx, "aaa")
	if msg := fmt.Sprint(err); !strings.Contains(msg, "aaa0000001") || !strings.Contains(msg, "aaa0000002") {
		t.Errorf("ambiguous error %q does not list the candidates", msg)
	}
}

func testList(t *testing.T, s run.Store) {
	runs, broken, err := s.List(ctx, run.Filter{})
	if err != nil || len(runs) != 0 || len(broken) != 0 {
		t.Fatalf("empty store List = %v, %v, %v", runs, broken, err)
	}
	type spec struct {
		state run.State
		repo  string
		taken bool // a supervisor took it up
	}
	specs := []spec{{run.StateQueued, "/src/a", false}, {run.StateRunning, "/src/b", true}, {run.StateSucceeded, "/src/a", true},
		{run.StateFailed, "/src/b", false}, {run.StateQueued, "/src/b", true}, {run.StateRunning, "/src/a", true},
		{run.StateQueued, "/src/a", false}}
	var ids []string // in creation order
	for i, sp := range specs {
		r := create(t, s, run.NewID(), func(r *run.Run) {
			r.State, r.Repo, r.Supervisor = sp.state, sp.repo, nil
			if sp.taken && i%2 == 0 {
				r.Supervisor = &run.SupervisorInfo{PID: 4242, Host: "h"}
			}
		})
		if sp.taken && i%2 == 1 { // taken up after its creation, as a claim is
			if _, err := s.Update(ctx, r.ID, func(r *run.Run) error {
				r.Supervisor = &run.SupervisorInfo{PID: 4242, Host: "h"}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, r.ID)
	}
	want := func(keep func(sp spec) bool) []string {
		var out []string
		for i := len(specs) - 1; i >= 0; i-- {
			if keep(specs[i]) {
				out = append(out, ids[i])
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    run.Filter
		want []string
	}{
		{"all", run.Filter{}, want(func(spec) bool { return true })},
		{"running", run.Filter{States: []run.State{run.StateRunning}}, want(func(sp spec) bool { return sp.state == run.StateRunning })},
		{"queued or failed", run.Filter{States: []run.State{run.StateQueued, run.StateFailed}},
			want(func(sp spec) bool { return sp.state == run.StateQueued || sp.state == run.StateFailed })},
		{"repo", run.Filter{Repo: "/src/b"}, want(func(sp spec) bool { return sp.repo == "/src/b" })},
		{"repo and state", run.Filter{Repo: "/src/a", States: []run.State{run.StateQueued, run.StateRunning}},
			want(func(sp spec) bool { return sp.repo == "/src/a" && sp.state != run.StateSucceeded })},
		{"taken", run.Filter{Taken: true}, want(func(sp spec) bool { return sp.state != run.StateQueued || sp.taken })},
		{"taken and active", run.Filter{Taken: true, States: []run.State{run.StateQueued, run.StateRunning}},
			want(func(sp spec) bool { return sp.taken && sp.state.Active() })},
		{"no match", run.Filter{States: []run.State{run.StateCancelled}}, nil},
		{"other repo", run.Filter{Repo: "/src/c"}, nil},
	} {
		runs, broken, err := s.List(ctx, tc.f)
		if err != nil || len(broken) != 0 {
			t.Fatalf("List %s: %v, broken %v", tc.name, err, broken)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List %s = %v, want %v (newest first)", tc.name, got, tc.want)
		}
	}
	// A run given back to the queue (its supervisor gone, as a lost
	// host's run is) is no longer taken.
	if _, err := s.Update(ctx, ids[4], func(r *run.Run) error { r.Supervisor = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if runs, _, err := s.List(ctx, run.Filter{Taken: true, States: []run.State{run.StateQueued}}); err != nil || len(runs) != 0 {
		t.Errorf("List of the taken queued runs after the last one's supervisor went: %d runs, %v; want none", len(runs), err)
	}
	// List returns whole records, and updating a run does not move it.
	if _, err := s.Update(ctx, ids[0], func(r *run.Run) error { r.Message = "touched"; return nil }); err != nil {
		t.Fatal(err)
	}
	runs, _, _ = s.List(ctx, run.Filter{})
	last := runs[len(runs)-1]
	if last.ID != ids[0] || last.Message != "touched" || last.Task != "task "+ids[0] || last.Version != 2 {
		t.Errorf("oldest run after update = %+v", last)
	}
}

func testUpdate(t *testing.T, s run.Store) {
	r := create(t, s, run.NewID(), nil)
	time.Sleep(2 * time.Millisecond)
	got, err := s.Update(ctx, r.ID, func(c *run.Run) error {
		if c.Task != r.Task || c.Version != 1 {
			t.Errorf("fn saw %+v", c)
		}
		c.Message = "hello"
		c.Attempts = append(c.Attempts, run.Attempt{N: 1, StartedAt: at(9)})
		c.ID, c.Seq, c.CreatedAt = "zzzzzzzzzz", 12345, at(0) // kept by the store
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || !got.UpdatedAt.After(r.UpdatedAt) || got.ID != r.ID || got.Seq != r.Seq || !got.CreatedAt.Equal(r.CreatedAt) {
		t.Fatalf("Update returned Version %d UpdatedAt %v (was %v) ID %s Seq %d CreatedAt %v",
			got.Version, got.UpdatedAt, r.UpdatedAt, got.ID, got.Seq, got.CreatedAt)
	}
	requireSameRun(t, got, get(t, s, r.ID))
	if _, err := s.Get(ctx, "zzzzzzzzzz"); !errors.Is(err, run.ErrNotFound) {
		t.Fatalf("changing ID in fn made a run: %v", err)
	}

	// fn's error comes back unchanged and nothing is stored, not even changes fn made.
	sentinel := errors.New("no thanks")
	_, err = s.Update(ctx, r.ID, func(c *run.Run) error { c.Message = "lost"; return sentinel })
	if err != sentinel {
		t.Fatalf("Update returned %v, want fn's error unchanged", err)
	}
	after := get(t, s, r.ID)
	if after.Version != 2 || after.Message != "hello" {
		t.Fatalf("a failed Update stored something: Version %d Message %q", after.Version, after.Message)
	}
	// The returned run is the caller's to change.
	got.Message = "scribbled"
	if get(t, s, r.ID).Message != "hello" {
		t.Fatal("changing the returned run changed the store")
	}
}

func testUpdateConcurrent(t *testing.T, s run.Store) {
	const workers, each = 8, 15
	r := create(t, s, run.NewID(), func(r *run.Run) { r.MaxAttempts = 0 })
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.Update(ctx, r.ID, func(c *run.Run) error { c.MaxAttempts++; return nil }); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := get(t, s, r.ID)
	if got.MaxAttempts != workers*each || got.Version != 1+workers*each {
		t.Fatalf("counter %d version %d after %d updates: want %d and %d (lost updates)",
			got.MaxAttempts, got.Version, workers*each, workers*each, 1+workers*each)
	}
}

func stateEvents(t *testing.T, s run.Store, id string) []run.Event {
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

func testTransition(t *testing.T, s run.Store) {
	r := create(t, s, run.NewID(), nil)
	got, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, "making the workspace")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != run.StatePreparing || got.Message != "making the workspace" || got.Version != 2 {
		t.Fatalf("Transition returned %+v", got)
	}
	requireSameRun(t, got, get(t, s, r.ID))
	evs := stateEvents(t, s, r.ID)
	if len(evs) != 1 || evs[0].State != run.StatePreparing || evs[0].Message != "making the workspace" || evs[0].Seq != 1 {
		t.Fatalf("journal after Transition = %+v", evs)
	}

	// from does not match: ErrConflict naming the current state, nothing changes.
	_, err = s.Transition(ctx, r.ID, []run.State{run.StateQueued, run.StateRunning}, run.StateFailed, run.ReasonInternal, "x")
	requireIs(t, "Transition from a wrong state", err, run.ErrConflict)
	if !strings.Contains(err.Error(), string(run.StatePreparing)) {
		t.Errorf("conflict error %q does not name the current state", err)
	}
	_, err = s.Transition(ctx, r.ID, nil, run.StateFailed, run.ReasonInternal, "x")
	requireIs(t, "Transition from no states", err, run.ErrConflict)
	if after := get(t, s, r.ID); after.Version != 2 || after.State != run.StatePreparing {
		t.Fatalf("a lost compare-and-set changed the run: %+v", after)
	}
	if n := len(stateEvents(t, s, r.ID)); n != 1 {
		t.Fatalf("a lost compare-and-set wrote to the journal: %d state events", n)
	}

	got, err = s.Transition(ctx, r.ID, []run.State{run.StateRunning, run.StatePreparing}, run.StateFailed, run.ReasonSandboxError, "no sandbox")
	if err != nil {
		t.Fatal(err)
	}
	evs = stateEvents(t, s, r.ID)
	last := evs[len(evs)-1]
	if got.Reason != run.ReasonSandboxError || last.State != run.StateFailed || last.Reason != run.ReasonSandboxError || last.Message != "no sandbox" {
		t.Fatalf("terminal transition: run %+v, event %+v", got, last)
	}
}

func testTransitionTimes(t *testing.T, s run.Store) {
	all := run.States
	r := create(t, s, run.NewID(), nil)
	if r.StartedAt != nil || r.FinishedAt != nil {
		t.Fatal("a new run has StartedAt/FinishedAt")
	}
	step := func(to run.State) *run.Run {
		t.Helper()
		got, err := s.Transition(ctx, r.ID, all, to, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	p := step(run.StatePreparing)
	if p.StartedAt == nil || p.FinishedAt != nil {
		t.Fatalf("leaving queued: StartedAt %v FinishedAt %v", p.StartedAt, p.FinishedAt)
	}
	started := *p.StartedAt
	if g := step(run.StateRunning); g.StartedAt == nil || !g.StartedAt.Equal(started) {
		t.Fatalf("StartedAt moved: %v, was %v", g.StartedAt, started)
	}
	f := step(run.StateInterrupted)
	if f.FinishedAt == nil || f.FinishedAt.Before(started) {
		t.Fatalf("terminal state: FinishedAt %v", f.FinishedAt)
	}
	q := step(run.StateQueued) // resume
	if q.FinishedAt != nil || q.StartedAt == nil || !q.StartedAt.Equal(started) {
		t.Fatalf("resumed run: FinishedAt %v StartedAt %v (first start %v)", q.FinishedAt, q.StartedAt, started)
	}
	if g := step(run.StateRunning); !g.StartedAt.Equal(started) {
		t.Fatalf("second start moved StartedAt: %v", g.StartedAt)
	}
	if g := step(run.StateSucceeded); g.FinishedAt == nil {
		t.Fatal("succeeded without FinishedAt")
	}

	c := create(t, s, run.NewID(), nil)
	got, err := s.Transition(ctx, c.ID, []run.State{run.StateQueued}, run.StateCancelled, run.ReasonCancelled, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.StartedAt != nil || got.FinishedAt == nil {
		t.Fatalf("cancelled while queued: StartedAt %v FinishedAt %v; want nil and set", got.StartedAt, got.FinishedAt)
	}
}

func testTransitionRace(t *testing.T, s run.Store) {
	r := create(t, s, run.NewID(), nil)
	targets := []run.State{run.StatePreparing, run.StateCancelled, run.StatePreparing, run.StateFailed,
		run.StateCancelled, run.StatePreparing, run.StateInterrupted, run.StateFailed}
	var mu sync.Mutex
	var winners []run.State
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, to := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, to, "", "")
			if err != nil && !errors.Is(err, run.ErrConflict) {
				t.Errorf("Transition to %s: %v", to, err)
				return
			}
			if err == nil {
				mu.Lock()
				winners = append(winners, to)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d transitions from queued won (%v), want exactly 1", len(winners), winners)
	}
	got := get(t, s, r.ID)
	evs := stateEvents(t, s, r.ID)
	if got.State != winners[0] || got.Version != 2 || len(evs) != 1 || evs[0].State != winners[0] {
		t.Fatalf("after the race: state %s version %d events %+v; winner %s", got.State, got.Version, evs, winners[0])
	}
}

func testEvents(t *testing.T, s run.Store) {
	r := create(t, s, run.NewID(), nil)
	evs, err := s.Events(ctx, r.ID, 0)
	if err != nil || len(evs) != 0 {
		t.Fatalf("new run Events = %v, %v; want none", evs, err)
	}
	given := at(10)
	in := []run.Event{
		run.NewEvent(run.EventSubmitted, "submitted", nil),
		{Type: run.EventAttempt, Attempt: 1, Time: given},
		run.NewEvent(run.EventCheck, "unit", map[string]any{"name": "unit", "passed": false, "exit_code": 1}),
		{Type: run.EventWarning, Message: "line one\nline two \"quoted\" ünïcode"},
		{Type: run.EventState, State: run.StateRunning, Reason: run.ReasonCompleted, Attempt: 2},
	}
	before := time.Now().Add(-time.Second)
	for i, e := range in {
		e.Seq = 777 // assigned by the store
		got, err := s.AppendEvent(ctx, r.ID, e)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seq != int64(i+1) {
			t.Fatalf("event %d got Seq %d, want %d", i, got.Seq, i+1)
		}
		if got.Time.IsZero() || (e.Time.IsZero() && got.Time.Before(before)) {
			t.Fatalf("event %d Time = %v", i, got.Time)
		}
		in[i] = got
	}
	all, err := s.Events(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(in) {
		t.Fatalf("Events returned %d, want %d", len(all), len(in))
	}
	for i := range in {
		w, g := in[i], all[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.State != w.State || g.Reason != w.Reason || g.Attempt != w.Attempt ||
			g.Message != w.Message || g.Time.Sub(w.Time).Abs() >= time.Microsecond {
			t.Errorf("event %d: stored %+v, got back %+v", i, w, g)
		}
		if string(w.Data) != "" && !jsonEqual(t, w.Data, g.Data) {
			t.Errorf("event %d data: %s, got back %s", i, w.Data, g.Data)
		}
	}
	if !all[1].Time.Equal(given) {
		t.Errorf("a given Time was replaced: %v", all[1].Time)
	}
	for _, after := range []int64{1, 3, 4, 5, 99} {
		got, err := s.Events(ctx, r.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		want := max(0, len(in)-int(after))
		if len(got) != want || (want > 0 && got[0].Seq != after+1) {
			t.Errorf("Events(after %d) = %d events starting %v; want %d starting %d", after, len(got), got, want, after+1)
		}
	}
	// Journals are per run.
	other := create(t, s, run.NewID(), nil)
	e, err := s.AppendEvent(ctx, other.ID, run.NewEvent(run.EventWarning, "other", nil))
	if err != nil || e.Seq != 1 {
		t.Fatalf("first event of another run: Seq %d, %v", e.Seq, err)
	}
	if evs, _ := s.Events(ctx, r.ID, 0); len(evs) != len(in) {
		t.Fatalf("appending to another run changed this journal: %d events", len(evs))
	}
	// Transitions and plain events share one sequence.
	if _, err := s.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", ""); err != nil {
		t.Fatal(err)
	}
	e, err = s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventSandbox, "started", nil))
	if err != nil || e.Seq != int64(len(in)+2) {
		t.Fatalf("event after a transition: Seq %d, %v; want %d", e.Seq, err, len(in)+2)
	}
}

func testEventsConcurrent(t *testing.T, s run.Store) {
	const workers, each = 6, 10
	r := create(t, s, run.NewID(), nil)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				msg := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventTool, msg, nil)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs, err := s.Events(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != workers*each {
		t.Fatalf("%d events, want %d", len(evs), workers*each)
	}
	next := map[int]int{} // per worker, the next index expected
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has Seq %d: want 1..n in order", i, e.Seq)
		}
		var w, n int
		fmt.Sscanf(e.Message, "w%d-%d", &w, &n)
		if n != next[w] {
			t.Fatalf("worker %d's events out of order: %d before %d", w, n, next[w])
		}
		next[w]++
	}
}

func testDelete(t *testing.T, s run.Store) {
	keep := create(t, s, run.NewID(), nil)
	r := create(t, s, run.NewID(), nil)
	if _, err := s.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "x", nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, r.ID)
	requireIs(t, "Get after Delete", err, run.ErrNotFound)
	_, err = s.Resolve(ctx, r.ID[:6])
	requireIs(t, "Resolve after Delete", err, run.ErrNotFound)
	_, err = s.Events(ctx, r.ID, 0)
	requireIs(t, "Events after Delete", err, run.ErrNotFound)
	requireIs(t, "second Delete", s.Delete(ctx, r.ID), run.ErrNotFound)
	runs, broken, err := s.List(ctx, run.Filter{})
	if err != nil || len(runs) != 1 || runs[0].ID != keep.ID || len(broken) != 0 {
		t.Fatalf("List after Delete = %v, %v, %v", runs, broken, err)
	}
	// The id is free again, with a fresh journal.
	again := create(t, s, r.ID, nil)
	if again.Version != 1 || again.Seq <= r.Seq {
		t.Fatalf("recreated run: Version %d Seq %d (old Seq %d)", again.Version, again.Seq, r.Seq)
	}
	if evs, err := s.Events(ctx, r.ID, 0); err != nil || len(evs) != 0 {
		t.Fatalf("recreated run has old events: %v, %v", evs, err)
	}
}
