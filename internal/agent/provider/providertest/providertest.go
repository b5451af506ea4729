// Package providertest is the contract suite every model provider passes:
// recorded wire fixtures (the implementation's testdata/*.json, response
// bodies as its server sends them) are served by a real httptest server and
// read through the real client code.
//
// Fixtures, by file name: simple_answer, parallel_tool_calls,
// malformed_tool_call, bad_json_arguments, finish_length, missing_usage,
// reasoning_content, error_401, error_model_not_found, models. Each holds
// the same scenario in the provider's own wire format. Bench measures one
// chat turn against the same server.
package providertest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/tools"
	"github.com/agentrun/agentrun/internal/catalog"
)

// Config describes the provider under test.
type Config struct {
	// New returns a client for the server's base URL (the root, without a
	// path) with the given key and retry policy.
	New func(root, key string, retry provider.Retry) provider.Provider
	// ChatPath and ModelsPath are where the API lives on the server.
	ChatPath   string
	ModelsPath string
	// Fixtures is the directory of fixtures (default "testdata").
	Fixtures string
	// AuthHeader is the header carrying the key and its value's prefix.
	AuthHeader, AuthPrefix string
}

type server struct {
	*httptest.Server
	mu     sync.Mutex
	queue  []reply
	bodies [][]byte
	auth   []string
}

type reply struct {
	status int
	body   []byte
}

func (c Config) start(t testing.TB) *server {
	s := &server{}
	models := c.fixture(t, "models")
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == c.ModelsPath {
			w.Write(models)
			return
		}
		if r.URL.Path != c.ChatPath {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.auth = append(s.auth, r.Header.Get(c.AuthHeader))
		rep := reply{status: 500, body: []byte(`{"error":{"message":"no reply queued"}}`)}
		if len(s.queue) > 0 {
			rep, s.queue = s.queue[0], s.queue[1:]
		}
		s.mu.Unlock()
		w.WriteHeader(rep.status)
		w.Write(rep.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) push(status int, body []byte) {
	s.mu.Lock()
	s.queue = append(s.queue, reply{status, body})
	s.mu.Unlock()
}

// forget drops the requests seen so far (a benchmark sends many).
func (s *server) forget() {
	s.mu.Lock()
	s.bodies, s.auth = nil, nil
	s.mu.Unlock()
}

func (c Config) fixture(t testing.TB, name string) []byte {
	t.Helper()
	dir := c.Fixtures
	if dir == "" {
		dir = "testdata"
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return b
}

var fast = provider.Retry{Attempts: 3, Base: 1, Max: 1000}

func request() provider.Request {
	return provider.Request{Model: "m", System: "sys", Tools: tools.Definitions(), Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Add a test"},
		{Role: provider.RoleAssistant, Content: "", Reasoning: "r", ToolCalls: []provider.ToolCall{{ID: "c1", Name: "list_dir", Arguments: "{}"}, {ID: "c2", Name: "read_file", Arguments: `{"path":"a"}`}}},
		{Role: provider.RoleTool, ToolCallID: "c1", Name: "list_dir", Content: "a"},
		{Role: provider.RoleTool, ToolCallID: "c2", Name: "read_file", Content: "1\tx"},
	}}
}

// Run runs the contract suite.
func Run(t *testing.T, c Config) {
	s := suite{c}
	t.Run("simple_answer", s.simpleAnswer)
	t.Run("parallel_tool_calls", s.parallelToolCalls)
	t.Run("malformed_tool_call", s.malformedToolCall)
	t.Run("bad_json_arguments", s.badJSONArguments)
	t.Run("finish_length", s.finishLength)
	t.Run("missing_usage", s.missingUsage)
	t.Run("reasoning_content", s.reasoningContent)
	t.Run("error_401", s.error401)
	t.Run("error_model_not_found", s.errorModelNotFound)
	t.Run("retries_5xx_and_429", s.retries)
	t.Run("unreachable", s.unreachable)
	t.Run("deterministic_request", s.deterministicRequest)
}

// Bench measures one chat turn through the provider's client (the
// suite's request: tools and a history of tool calls), answered by the
// suite's server with the simple_answer fixture.
func Bench(b *testing.B, c Config) {
	b.Run("ChatTurn", func(b *testing.B) {
		srv := c.start(b)
		answer := c.fixture(b, "simple_answer")
		p := c.New(srv.URL, "sk-test-key", fast)
		req := request()
		for b.Loop() {
			srv.push(200, answer)
			if _, err := p.Chat(ctx, req); err != nil {
				b.Fatal(err)
			}
			srv.forget()
		}
	})
}

// suite holds the subtests of Run for one provider.
type suite struct{ c Config }

var ctx = context.Background()

// chat answers one chat turn with the fixture, sent with status.
func (s suite) chat(t *testing.T, fixture string, status int) (*provider.Response, *server, error) {
	srv := s.c.start(t)
	srv.push(status, s.c.fixture(t, fixture))
	p := s.c.New(srv.URL, "sk-test-key", fast)
	resp, err := p.Chat(ctx, request())
	return resp, srv, err
}

// ok is chat of a fixture sent with 200, which must succeed after one
// request, sent as JSON with the key in the auth header.
func (s suite) ok(t *testing.T, fixture string) *provider.Response {
	t.Helper()
	resp, srv, err := s.chat(t, fixture, 200)
	if err != nil {
		t.Fatalf("%s: %v", fixture, err)
	}
	if len(srv.bodies) != 1 || !json.Valid(srv.bodies[0]) {
		t.Fatal("request not sent as JSON")
	}
	if got := srv.auth[0]; got != s.c.AuthPrefix+"sk-test-key" {
		t.Fatalf("auth header %q", got)
	}
	return resp
}

func (s suite) simpleAnswer(t *testing.T) {
	r := s.ok(t, "simple_answer")
	if r.Message.Content != "The test already covers the empty input case." || len(r.Message.ToolCalls) != 0 ||
		r.FinishReason != provider.FinishStop || !r.UsageKnown || r.Usage.PromptTokens != 812 || r.Message.Role != provider.RoleAssistant {
		t.Fatalf("%+v", r)
	}
}

func (s suite) parallelToolCalls(t *testing.T) {
	r := s.ok(t, "parallel_tool_calls")
	if r.FinishReason != provider.FinishToolCall || len(r.Message.ToolCalls) != 2 {
		t.Fatalf("%+v", r)
	}
	a, b := r.Message.ToolCalls[0], r.Message.ToolCalls[1]
	if a.Name != "read_file" || b.Name != "grep" || a.ID == "" || a.ID == b.ID {
		t.Fatalf("%+v", r.Message.ToolCalls)
	}
	args, bad := tools.Parse(tools.Lookup("read_file").Params, a.Arguments)
	if bad != nil || args.Str("path") != "parser.go" {
		t.Fatalf("%q: %+v", a.Arguments, bad)
	}
	if r.Usage.CachedTokens <= 0 {
		t.Fatalf("cached tokens not read: %+v", r.Usage)
	}
}

func (s suite) malformedToolCall(t *testing.T) {
	r := s.ok(t, "malformed_tool_call")
	if len(r.Message.ToolCalls) != 0 || !strings.Contains(r.Message.Content, "go test ./...") || r.FinishReason != provider.FinishStop {
		t.Fatalf("%+v", r)
	}
}

func (s suite) badJSONArguments(t *testing.T) {
	r := s.ok(t, "bad_json_arguments")
	if len(r.Message.ToolCalls) != 1 {
		t.Fatalf("%+v", r)
	}
	tc := r.Message.ToolCalls[0]
	tool := tools.Lookup(tc.Name)
	if tool == nil {
		t.Fatalf("tool %q", tc.Name)
	}
	if _, bad := tools.Parse(tool.Params, tc.Arguments); bad == nil {
		t.Fatalf("arguments %q accepted", tc.Arguments)
	}
}

func (s suite) finishLength(t *testing.T) {
	r := s.ok(t, "finish_length")
	if r.FinishReason != provider.FinishLength || !strings.HasPrefix(r.Message.Content, "Here is the complete new file") {
		t.Fatalf("%+v", r)
	}
}

func (s suite) missingUsage(t *testing.T) {
	r := s.ok(t, "missing_usage")
	if r.UsageKnown || r.Message.Content != "Done." || r.Usage.PromptTokens != -1 {
		t.Fatalf("%+v", r)
	}
}

func (s suite) reasoningContent(t *testing.T) {
	r := s.ok(t, "reasoning_content")
	if r.Message.Reasoning != "The parser has no test for an empty line; I will read it first." || len(r.Message.ToolCalls) != 1 {
		t.Fatalf("%+v", r)
	}
}

func (s suite) error401(t *testing.T) {
	_, srv, err := s.chat(t, "error_401", 401)
	if !catalog.Has(err, catalog.ModelAuth) || len(srv.bodies) != 1 {
		t.Fatalf("%v (%d requests)", err, len(srv.bodies))
	}
	if strings.Contains(err.Error(), "sk-test-key") {
		t.Fatal("the key is in the error")
	}
}

func (s suite) errorModelNotFound(t *testing.T) {
	_, _, err := s.chat(t, "error_model_not_found", 404)
	if !catalog.Has(err, catalog.ModelNotLoaded) {
		t.Fatalf("%v", err)
	}
	var names []string
	var m struct {
		Data []struct{ ID string } `json:"data"`
	}
	json.Unmarshal(s.c.fixture(t, "models"), &m)
	for _, d := range m.Data {
		names = append(names, d.ID)
	}
	if !strings.Contains(err.Error(), names[0]) {
		t.Fatalf("loaded models not named: %v", err)
	}
}

func (s suite) retries(t *testing.T) {
	srv := s.c.start(t)
	srv.push(503, []byte(`{"error":{"message":"overloaded"}}`))
	srv.push(429, []byte(`{"error":{"message":"slow down"}}`))
	srv.push(200, s.c.fixture(t, "simple_answer"))
	resp, err := s.c.New(srv.URL, "k", fast).Chat(ctx, request())
	if err != nil || resp.Message.Content == "" || len(srv.bodies) != 3 {
		t.Fatalf("%v, %d requests", err, len(srv.bodies))
	}
	// Bounded: a server that keeps failing is given up on.
	s2 := s.c.start(t)
	for i := 0; i < 5; i++ {
		s2.push(500, []byte(`{"error":{"message":"boom"}}`))
	}
	_, err = s.c.New(s2.URL, "k", fast).Chat(ctx, request())
	if !catalog.Has(err, catalog.ModelProtocol) || len(s2.bodies) != fast.Attempts {
		t.Fatalf("%v, %d requests", err, len(s2.bodies))
	}
}

func (s suite) unreachable(t *testing.T) {
	_, err := s.c.New("http://127.0.0.1:1", "k", fast).Chat(ctx, request())
	if !catalog.Has(err, catalog.ModelUnreachable) {
		t.Fatalf("%v", err)
	}
}

func (s suite) deterministicRequest(t *testing.T) {
	srv := s.c.start(t)
	srv.push(200, s.c.fixture(t, "simple_answer"))
	srv.push(200, s.c.fixture(t, "simple_answer"))
	p := s.c.New(srv.URL, "k", fast)
	p.Chat(ctx, request())
	p.Chat(ctx, request())
	if len(srv.bodies) != 2 || string(srv.bodies[0]) != string(srv.bodies[1]) {
		t.Fatal("the same request encodes differently")
	}
}
