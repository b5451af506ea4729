package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/server"
)

// TestHeartbeatFollowsAClaim: the heartbeat that carries a run just
// claimed goes rebeatDelay after the claim, not beside the run's way to
// its agent's start, and not only at the next beat a third of the TTL on.
func TestHeartbeatFollowsAClaim(t *testing.T) {
	type beat struct {
		at   time.Time
		runs []server.HeldRun
	}
	beats := make(chan beat, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in server.HeartbeatRequest
		if r.URL.Path != "/v1/hosts/heartbeat" || json.NewDecoder(r.Body).Decode(&in) != nil {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
		beats <- beat{time.Now(), in.Runs}
		// Answered at once: the next beat is a third of the TTL on.
		_ = json.NewEncoder(w).Encode(server.Heartbeat{Lost: []string{}, Cancel: []string{}, LeaseTTLMS: time.Minute.Milliseconds()})
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "h1.secret")
	if err != nil {
		t.Fatal(err)
	}
	w := &Remote{Client: c, running: map[string]*job{}, beat: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.heartbeats(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func() beat {
		t.Helper()
		select {
		case b := <-beats:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat came")
			return beat{}
		}
	}
	if b := next(); len(b.runs) != 0 {
		t.Fatalf("the first heartbeat carries %v", b.runs)
	}
	at := time.Now()
	w.claimed(newJob("r1", 4, "p"))
	b := next()
	if len(b.runs) != 1 || b.runs[0].ID != "r1" || b.runs[0].Token != 4 {
		t.Fatalf("the heartbeat after the claim carries %v", b.runs)
	}
	if d := b.at.Sub(at); d < rebeatDelay {
		t.Errorf("the heartbeat went %v after the claim, before rebeatDelay (%v)", d, rebeatDelay)
	}
}
