package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
)

// hostRoutes is a team server's run routes for hosts as the store calls
// them, on loopback: it keeps one record, journals the events it is sent,
// and logs every call in the order it came (the events a PUT carries
// before it). hold, when set, keeps each
// event's answer until it is closed.
type hostRoutes struct {
	t    *testing.T
	mu   sync.Mutex
	rec  run.Run
	log  []string // "GET", "PUT <to>", "EVENT <message>"
	hold chan struct{}
	got  chan string // each event's message, as it arrives
	// holdPut, when set, keeps each PUT's answer until it is closed
	// (putGot is told of each as it arrives); moved, when set, is the
	// state the run moves to before a PUT, which is then answered
	// record_stale.
	holdPut chan struct{}
	putGot  chan struct{}
	moved   run.State
}

func (h *hostRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.Method == "GET" && r.URL.Path == "/v1/hosts/runs/"+h.rec.ID:
		h.log = append(h.log, "GET")
		json.NewEncoder(w).Encode(h.rec)
	case r.Method == "PUT" && r.URL.Path == "/v1/hosts/runs/"+h.rec.ID:
		var in server.RecordWrite
		if h.moved != "" {
			h.rec.State, h.rec.Version, h.moved = h.moved, h.rec.Version+1, ""
			h.log = append(h.log, "PUT stale")
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"error": catalog.RecordStale.New("moved")})
			return
		}
		if h.putGot != nil {
			h.putGot <- struct{}{}
		}
		if h.holdPut != nil {
			h.mu.Unlock()
			<-h.holdPut
			h.mu.Lock()
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Token != 7 || in.Version != h.rec.Version {
			h.t.Errorf("PUT: %v, token %d, version %d (the record's: %d)", err, in.Token, in.Version, h.rec.Version)
		}
		for _, e := range in.Events {
			h.log = append(h.log, "EVENT "+e.Message+" (with PUT)")
		}
		h.rec.Version++
		if in.Transition != nil {
			h.rec.State = in.Transition.To
			h.log = append(h.log, "PUT "+string(in.Transition.To))
		}
		json.NewEncoder(w).Encode(h.rec)
	case r.Method == "POST" && r.URL.Path == "/v1/hosts/runs/"+h.rec.ID+"/events":
		var in server.AppendRequest
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Token != 7 {
			h.t.Errorf("POST events: %v, token %d", err, in.Token)
		}
		h.log = append(h.log, "EVENT "+in.Event.Message)
		if h.got != nil {
			h.got <- in.Event.Message
		}
		if h.hold != nil {
			h.mu.Unlock()
			<-h.hold
			h.mu.Lock()
		}
		json.NewEncoder(w).Encode(in.Event)
	default:
		h.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	}
}

func (h *hostRoutes) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

func newRoutesStore(t *testing.T) (*hostRoutes, *remoteStore) {
	t.Helper()
	h := &hostRoutes{t: t, rec: run.Run{ID: run.NewID(), State: run.StateQueued, Version: 3, Repo: "/srv/projects/p.git"}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "host.secret")
	if err != nil {
		t.Fatal(err)
	}
	return h, &remoteStore{c: c, j: newJob(h.rec.ID, 7, "p"), repo: "/cache/p.git"}
}

// TestStoreReadsTheClaimUntilItWrites: the record the claim brought
// answers the supervisor's reads until its first write (no call to the
// server for them); the write goes from that record's version, and reads
// after it ask the server.
func TestStoreReadsTheClaimUntilItWrites(t *testing.T) {
	ctx := context.Background()
	h, st := newRoutesStore(t)
	claimed := h.rec
	st.prime(st.local(&claimed))
	for range 2 {
		r, err := st.Get(ctx, h.rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != run.StateQueued || r.Version != 3 || r.Repo != "/cache/p.git" {
			t.Fatalf("Get = %s v%d in %s, want the claim's record (queued v3) in the host's cache", r.State, r.Version, r.Repo)
		}
		r.State = run.StateFailed // a caller's change is its own
	}
	if c := h.calls(); len(c) != 0 {
		t.Fatalf("reads before the first write called the server: %v", c)
	}
	if _, err := st.Transition(ctx, h.rec.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, ""); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, h.rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != run.StatePreparing || r.Version != 4 {
		t.Errorf("Get after the write = %s v%d, want preparing v4", r.State, r.Version)
	}
	if c, want := h.calls(), []string{"PUT preparing", "GET"}; !slices.Equal(c, want) {
		t.Errorf("calls = %v, want %v", c, want)
	}
}

// TestJournalDoesNotWait: AppendEvent returns without waiting for the
// server; the events reach it in the order they were journaled, all of
// them before a write of the record that follows them, and drain sends
// what is left.
func TestJournalDoesNotWait(t *testing.T) {
	ctx := context.Background()
	h, st := newRoutesStore(t)
	h.hold, h.got = make(chan struct{}), make(chan string, 8)
	var once sync.Once
	release := func() { once.Do(func() { close(h.hold) }) }
	t.Cleanup(release) // before the server's Close, which waits for its handlers
	claimed := h.rec
	st.prime(st.local(&claimed))
	for _, m := range []string{"one", "two", "three"} {
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			if _, err := st.AppendEvent(ctx, h.rec.ID, run.NewEvent(run.EventAttempt, m, nil)); err != nil {
				t.Error(err)
			}
		}()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatalf("AppendEvent(%s) waited for the server, which holds the first event's answer", m)
		}
	}
	if m := <-h.got; m != "one" {
		t.Fatalf("first event sent: %s", m)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := st.Transition(ctx, h.rec.ID, []run.State{run.StateQueued}, run.StateRunning, run.ReasonNone, "")
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("the write did not wait for the events journaled before it (err %v): %v", err, h.calls())
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendEvent(ctx, h.rec.ID, run.NewEvent(run.EventAttempt, "four", nil)); err != nil {
		t.Fatal(err)
	}
	st.drain()
	if c, want := h.calls(), []string{"EVENT one", "EVENT two", "EVENT three", "PUT running", "EVENT four"}; !slices.Equal(c, want) {
		t.Errorf("calls = %v, want %v", c, want)
	}
}

// TestWriteCarriesTheJournal: events journaled just before a write of the
// record ride on it (one call), and go on their own where no write is
// made after all.
func TestWriteCarriesTheJournal(t *testing.T) {
	ctx := context.Background()
	h, st := newRoutesStore(t)
	st.journal.batch = time.Hour // no sender of their own before the write
	claimed := h.rec
	st.prime(st.local(&claimed))
	for _, m := range []string{"sandbox started", "also"} {
		if _, err := st.AppendEvent(ctx, h.rec.ID, run.NewEvent(run.EventSandbox, m, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Transition(ctx, h.rec.ID, []run.State{run.StateQueued}, run.StateRunning, run.ReasonNone, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendEvent(ctx, h.rec.ID, run.NewEvent(run.EventAttempt, "refused", nil)); err != nil {
		t.Fatal(err)
	}
	no := errors.New("no")
	if _, err := st.Update(ctx, h.rec.ID, func(*run.Run) error { return no }); !errors.Is(err, no) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	want := []string{"EVENT sandbox started (with PUT)", "EVENT also (with PUT)", "PUT running", "EVENT refused"}
	if c := h.calls(); !slices.Equal(c, want) {
		t.Errorf("calls = %v, want %v", c, want)
	}
}

// TestFirstMoveGoesAhead: the move to preparing from the claim's record
// is answered while the server holds the write's answer, with the record
// the server makes of it; a read, the next write and what is journaled
// after it wait for the server, in that order.
func TestFirstMoveGoesAhead(t *testing.T) {
	ctx := context.Background()
	h, st := newRoutesStore(t)
	st.journal.batch = time.Hour // the journal goes with the writes and drain
	h.holdPut, h.putGot = make(chan struct{}), make(chan struct{}, 4)
	var once sync.Once
	release := func() { once.Do(func() { close(h.holdPut) }) }
	t.Cleanup(release)
	claimed := h.rec
	st.prime(st.local(&claimed))
	if _, err := st.AppendEvent(ctx, h.rec.ID, run.NewEvent(run.EventSandbox, "before", nil)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		r   *run.Run
		err error
	}
	moved := make(chan answer, 1)
	go func() {
		r, err := st.TransitionWith(ctx, h.rec.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, "",
			func(r *run.Run) error { r.Task = "mine"; return nil })
		moved <- answer{r, err}
	}()
	var a answer
	select {
	case a = <-moved:
	case <-time.After(10 * time.Second):
		t.Fatal("the move to preparing waited for the server's answer")
	}
	if a.err != nil || a.r.State != run.StatePreparing || a.r.Version != 4 || a.r.StartedAt == nil || a.r.Task != "mine" || a.r.Repo != "/cache/p.git" {
		t.Fatalf("the move answered %v %+v, want preparing v4, started, with fn's change, in the host's cache", a.err, a.r)
	}
	if _, err := st.AppendEvent(ctx, h.rec.ID, run.NewEvent(run.EventSandbox, "after", nil)); err != nil {
		t.Fatal(err)
	}
	<-h.putGot
	read := make(chan answer, 1)
	go func() {
		r, err := st.Get(ctx, h.rec.ID)
		read <- answer{r, err}
	}()
	wrote := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, err := st.Transition(ctx, h.rec.ID, []run.State{run.StatePreparing}, run.StateRunning, run.ReasonNone, "")
		wrote <- err
	}()
	select {
	case a := <-read:
		t.Fatalf("a read did not wait for the write ahead: %v %+v", a.err, a.r)
	case err := <-wrote:
		t.Fatalf("a write did not wait for the write ahead: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	// The read and the write both waited: either may go first.
	a = <-read
	if a.err != nil || !(a.r.State == run.StatePreparing && a.r.Version == 4 || a.r.State == run.StateRunning && a.r.Version == 5) {
		t.Fatalf("Get after the write ahead = %v %+v, want preparing v4 (or running v5)", a.err, a.r)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	st.drain()
	ahead := []string{"EVENT before (with PUT)", "PUT preparing"}
	next := []string{"EVENT after (with PUT)", "PUT running"}
	if c := h.calls(); !slices.Equal(c, slices.Concat(ahead, []string{"GET"}, next)) && !slices.Equal(c, slices.Concat(ahead, next, []string{"GET"})) {
		t.Errorf("calls = %v, want %v, then GET and %v in either order", c, ahead, next)
	}
}

// TestRefusedMoveAheadStopsTheRun: a move to preparing answered ahead that
// the server then refuses (the run moved on meanwhile) ends the run's
// context here, and every later call fails with it.
func TestRefusedMoveAheadStopsTheRun(t *testing.T) {
	ctx := context.Background()
	h, st := newRoutesStore(t)
	h.moved = run.StateCancelled
	rctx := st.j.ctx(ctx)
	claimed := h.rec
	st.prime(st.local(&claimed))
	if r, err := st.Transition(ctx, h.rec.ID, []run.State{run.StateQueued}, run.StatePreparing, run.ReasonNone, ""); err != nil || r.State != run.StatePreparing {
		t.Fatalf("the move ahead: %v %+v", err, r)
	}
	select {
	case <-rctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run's context did not end when the server refused its move to preparing")
	}
	if err := context.Cause(rctx); !errors.Is(err, run.ErrConflict) {
		t.Errorf("the run ended with %v, want the conflict", err)
	}
	if st.j.isLost() {
		t.Error("the run was abandoned: it is still this host's, to release")
	}
	if _, err := st.Get(ctx, h.rec.ID); !errors.Is(err, run.ErrConflict) {
		t.Errorf("Get after the refusal: %v", err)
	}
	if _, err := st.Transition(ctx, h.rec.ID, []run.State{run.StatePreparing}, run.StateFailed, run.ReasonNone, ""); !errors.Is(err, run.ErrConflict) {
		t.Errorf("a write after the refusal: %v", err)
	}
	if c, want := h.calls(), []string{"PUT stale", "GET"}; !slices.Equal(c, want) {
		t.Errorf("calls = %v, want %v", c, want)
	}
}
