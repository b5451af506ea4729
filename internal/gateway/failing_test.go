package gateway

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFailingKeyRefused: the gateway gives up on a model server that
// refuses the run's key on KeyRefusals model requests in a row; a 401
// with an answer between, or on a request that is not a model request,
// does not count.
func TestFailingKeyRefused(t *testing.T) {
	var refuse atomic.Bool
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() || strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`))
			return
		}
		modelAPI(nil)(w, r)
	})
	var calls atomic.Int32
	tg := startGateway(t, Options{Routes: testRoutes(up.url), OnFailing: func(string) { calls.Add(1) }})
	p := protoByName(t, "chat")
	send := func() int {
		resp, _ := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
		return resp.StatusCode
	}
	models := func() {
		tg.do(t, "GET", "/openai/v1/models", p.keyHdr(tg.Placeholder()), "")
	}
	// 401, answered, 401, then model-list 401s: not in a row.
	refuse.Store(true)
	send()
	refuse.Store(false)
	if code := send(); code != 200 {
		t.Fatalf("answer %d", code)
	}
	refuse.Store(true)
	send()
	refuse.Store(false)
	models()
	models()
	if why := tg.Failing(); why != "" || calls.Load() != 0 {
		t.Fatalf("failing after 401s that were not in a row: %q", why)
	}
	// Two model requests refused in a row (the model lists between do not
	// break the row).
	refuse.Store(true)
	if code := send(); code != 401 {
		t.Fatalf("the upstream's 401 was not passed on: %d", code)
	}
	why := tg.Failing()
	if !strings.Contains(why, "refused the key from OPENAI_API_KEY (401 Unauthorized) on 2 model requests in a row") ||
		!strings.Contains(why, up.url.Host) || calls.Load() != 1 {
		t.Fatalf("failing %q, %d calls", why, calls.Load())
	}
	send()
	if calls.Load() != 1 || tg.Failing() != why {
		t.Fatalf("OnFailing called %d times, failing %q", calls.Load(), tg.Failing())
	}
	ev := tg.events.kind("model_failing")
	if len(ev) != 1 || ev[0].Message != why || ev[0].Data["status"] != 401 || ev[0].Data["upstream"] != "http://"+up.url.Host {
		t.Fatalf("events %+v", ev)
	}
	if strings.Contains(why, realOpenAI) {
		t.Fatal("the reason holds the key")
	}
}

// TestFailingUnreachable: the gateway gives up on a model server that no
// model request has reached for UnreachableFor, over at least three.
func TestFailingUnreachable(t *testing.T) {
	dead := deadURL(t)
	var calls atomic.Int32
	tg := startGateway(t, Options{Routes: testRoutes(dead), UnreachableFor: 300 * time.Millisecond, OnFailing: func(string) { calls.Add(1) }})
	p := protoByName(t, "anthropic")
	send := func() {
		resp, _ := tg.do(t, "POST", "/anthropic"+p.path, p.keyHdr(tg.Placeholder()), p.body)
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	// Many requests at once are not a long time.
	for range 5 {
		send()
	}
	if tg.Failing() != "" {
		t.Fatalf("failing after %d quick requests: %q", 5, tg.Failing())
	}
	time.Sleep(350 * time.Millisecond)
	send()
	why := tg.Failing()
	if !strings.Contains(why, "the model server http://"+dead.Host+" could not be reached for") || !strings.Contains(why, "(6 model requests in a row)") ||
		calls.Load() != 1 {
		t.Fatalf("failing %q, %d calls", why, calls.Load())
	}
	if ev := tg.events.kind("model_failing"); len(ev) != 1 || ev[0].Data["status"] != nil {
		t.Fatalf("events %+v", ev)
	}
	// A long time with too few requests is not enough either.
	tg2 := startGateway(t, Options{Routes: testRoutes(dead), UnreachableFor: 100 * time.Millisecond})
	tg2.do(t, "POST", "/anthropic"+p.path, p.keyHdr(tg2.Placeholder()), p.body)
	time.Sleep(150 * time.Millisecond)
	tg2.do(t, "POST", "/anthropic"+p.path, p.keyHdr(tg2.Placeholder()), p.body)
	if tg2.Failing() != "" {
		t.Fatalf("failing after 2 requests: %q", tg2.Failing())
	}
}

// TestUpstreamNotFound: a model request the server answers 404 (no such
// path, or no such model) is an event naming where it went; a 404 to
// anything else (a model list) is not; neither counts toward giving up.
func TestUpstreamNotFound(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		w.Write([]byte(`{"error":{"message":"The model does not exist","type":"invalid_request_error"}}`))
	})
	routes := testRoutes(up.url)
	u := *up.url
	u.Path = "/api/v4"
	routes[RouteOpenAI] = Route{Upstream: &u, Credential: routes[RouteOpenAI].Credential}
	tg := startGateway(t, Options{Routes: routes})
	p := protoByName(t, "chat")
	for range 3 {
		if resp, _ := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body); resp.StatusCode != 404 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	tg.do(t, "GET", "/openai/v1/models", p.keyHdr(tg.Placeholder()), "")
	ev := tg.events.kind("upstream_error")
	if len(ev) != 3 || ev[0].Data["status"] != 404 || ev[0].Data["path"] != "/api/v4/v1/chat/completions" ||
		!strings.Contains(ev[0].Message, "answered 404 Not Found to POST /api/v4/v1/chat/completions") {
		t.Fatalf("events %+v", ev)
	}
	if tg.Failing() != "" {
		t.Fatalf("gave up on 404s: %q", tg.Failing())
	}
}
