package supervisor

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
)

const gatewayTestKey = "sk-test-real-key-of-the-model-server"

// gatewayRun is a run whose gateway has one OpenAI route to srv, its key
// in the handed-off variable MODEL_KEY.
func gatewayRun(t *testing.T, srv *modelserver.Server) (*run.Run, *gatewayStep, *journal) {
	t.Helper()
	r, l := stepRun(t, t.TempDir(), "")
	r.Gateway = &run.GatewaySpec{Routes: []run.RouteSpec{{Name: "openai", URL: srv.URL, Server: "local",
		Keys: []run.KeySource{{Env: "MODEL_KEY", Header: "authorization"}}}}}
	j := &journal{}
	env := map[string]string{"MODEL_KEY": gatewayTestKey}
	return r, &gatewayStep{Record: r, Layout: l, Getenv: func(k string) string { return env[k] }, Event: j.add}, j
}

// chat sends one chat completion through the gateway's socket with key.
func chat(t *testing.T, g *gatewayStep, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://gateway/openai/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	var d net.Dialer
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", g.Socket())
		}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The whole answer, as an agent reads it: the gateway meters it as it
	// passes.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestGatewayStep: Start serves the real gateway on a unix socket; a
// request with the placeholder reaches the model server with the real key
// (which the agent never sees) and is metered; a request without it is
// refused and journaled. Stop closes the gateway, removes the socket and
// is safe twice; the usage stays readable.
func TestGatewayStep(t *testing.T) {
	srv := modelserver.New(t, gatewayTestKey, "m", modelserver.Text("hello"))
	_, g, j := gatewayRun(t, srv)
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(g.Socket()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %q: %v", g.Socket(), err)
	}
	h := g.host()
	if h == nil || h.Key == "" || h.Key == gatewayTestKey || h.Socket != g.Socket() || strings.Join(h.Routes, ",") != "openai" {
		t.Fatalf("host access %+v", h)
	}
	if a := g.access("127.0.0.1:4000"); a == nil || a.URL != "http://127.0.0.1:4000" || a.Key != h.Key {
		t.Fatalf("sandbox access %+v", a)
	}
	if g.access("") != nil {
		t.Fatal("access without an address in the sandbox")
	}
	if code := chat(t, g, h.Key); code != http.StatusOK {
		t.Fatalf("chat through the gateway: %d", code)
	}
	reqs := srv.ModelRequests(modelserver.Chat)
	if len(reqs) != 1 || reqs[0].Key != gatewayTestKey {
		t.Fatalf("requests at the model server %+v", reqs)
	}
	if u := g.usage(); u == nil || u.PromptTokens == 0 || u.CompletionTokens == 0 || u.Requests != 1 {
		t.Fatalf("usage %+v", u)
	}
	if code := chat(t, g, "not-the-placeholder"); code != http.StatusUnauthorized {
		t.Fatalf("chat with another key: %d", code)
	}
	if refused := j.of(run.EventGateway); len(refused) != 1 || data(t, refused[0])["kind"] != "refused" {
		t.Fatalf("gateway events %+v", j.evs)
	}
	g.announce("127.0.0.1:4000")
	evs := j.of(run.EventGateway)
	if len(evs) != 2 || evs[1].Message != "model gateway started at http://127.0.0.1:4000 (openai)" {
		t.Fatalf("gateway events %+v", evs)
	}
	started := data(t, evs[1])
	hasKeys(t, started, "routes", "max_tokens", "max_cost")
	if started["kind"] != "started" {
		t.Fatalf("started event data %v", started)
	}
	sock := g.Socket()
	g.Stop(ctx)
	g.Stop(ctx)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after Stop: %v", err)
	}
	if u := g.usage(); u == nil || u.Requests != 1 {
		t.Fatalf("usage after Stop %+v", u)
	}
}

// TestGatewayStepBudget: past the run's budget the gateway refuses the
// next request, calls the budget stop once and says why.
func TestGatewayStepBudget(t *testing.T) {
	srv := modelserver.New(t, gatewayTestKey, "m", modelserver.Text("hello"))
	r, g, j := gatewayRun(t, srv)
	r.Gateway.MaxTokens = 1
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(context.Background())
	stopped := make(chan struct{}, 2)
	g.setStop(func(cause error) {
		if cause == errBudget {
			stopped <- struct{}{}
		}
	})
	if code := chat(t, g, g.host().Key); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	if code := chat(t, g, g.host().Key); code == http.StatusOK {
		t.Fatal("a request past the budget was served")
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the budget stop was not called")
	}
	if g.exceeded() == "" {
		t.Fatal("exceeded says nothing")
	}
	var kinds []string
	for _, e := range j.of(run.EventGateway) {
		kinds = append(kinds, data(t, e)["kind"].(string))
	}
	if strings.Join(kinds, ",") != "budget_exceeded" {
		t.Fatalf("gateway event kinds %v", kinds)
	}
}

// TestGatewayStepFailing: a model server that refuses the run's key on
// two model requests in a row ends the attempt (the stop is called with
// errModelFailing, once), and failing says why.
func TestGatewayStepFailing(t *testing.T) {
	srv := modelserver.New(t, "sk-another-key", "m", modelserver.Text("hello"))
	_, g, j := gatewayRun(t, srv)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer g.Stop(context.Background())
	stopped := make(chan error, 4)
	g.setStop(func(cause error) { stopped <- cause })
	for range 3 {
		if code := chat(t, g, g.host().Key); code != http.StatusUnauthorized {
			t.Fatalf("status %d", code)
		}
	}
	select {
	case cause := <-stopped:
		if cause != errModelFailing {
			t.Fatalf("stopped for %v", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stop was not called")
	}
	if len(stopped) != 0 {
		t.Fatal("the stop was called twice")
	}
	if why := g.failing(); !strings.Contains(why, "refused the key from MODEL_KEY (401 Unauthorized) on 2 model requests in a row") {
		t.Fatalf("failing %q", why)
	}
	var kinds []string
	for _, e := range j.of(run.EventGateway) {
		kinds = append(kinds, data(t, e)["kind"].(string))
	}
	if strings.Join(kinds, ",") != "upstream_error,upstream_error,model_failing,upstream_error" {
		t.Fatalf("gateway event kinds %v", kinds)
	}
}

// TestGatewayStepNone: a run without routes has no gateway; every method
// says so, on the step as on a nil one.
func TestGatewayStepNone(t *testing.T) {
	r, l := stepRun(t, t.TempDir(), "")
	j := &journal{}
	g := &gatewayStep{Record: r, Layout: l, Event: j.add}
	var none *gatewayStep
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*gatewayStep{g, none} {
		g.announce("127.0.0.1:1")
		g.setStop(func(error) {})
		if g.Socket() != "" || g.host() != nil || g.access("127.0.0.1:1") != nil || g.usage() != nil || g.exceeded() != "" || g.failing() != "" {
			t.Fatalf("%+v answers as a gateway", g)
		}
		g.Stop(context.Background())
		g.Stop(context.Background())
	}
	if j.len() != 0 {
		t.Fatalf("events %+v", j.evs)
	}
}

// TestGatewayStepNoKey: a route whose key is not to be found fails Start,
// and nothing is left listening.
func TestGatewayStepNoKey(t *testing.T) {
	srv := modelserver.New(t, gatewayTestKey, "m", nil)
	_, g, _ := gatewayRun(t, srv)
	g.Getenv = func(string) string { return "" }
	if err := g.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "MODEL_KEY") {
		t.Fatalf("err %v", err)
	}
	if g.Socket() != "" {
		t.Fatalf("socket %q", g.Socket())
	}
	g.Stop(context.Background())
}
