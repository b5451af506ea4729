// Package fakemodel is a scripted OpenAI-compatible chat completions server
// for tests (the loop's and other packages' end-to-end runs): it replays a
// script of replies in order, one per POST /v1/chat/completions, and records
// every request body byte for byte. GET /v1/models lists the one model.
//
// It is a test double for a model only; it never runs anything it is sent.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
)

// Reply is one scripted answer.
type Reply struct {
	Content        string
	Reasoning      string
	ReasoningField string // "reasoning_content" (default) or "reasoning"
	ToolCalls      []provider.ToolCall
	// FinishReason defaults to "tool_calls" when there are calls, else "stop".
	FinishReason string
	// Usage defaults to a small count; NoUsage leaves the usage out.
	Usage   *provider.Usage
	NoUsage bool
	// Status and Body, when set, are sent as they are instead.
	Status int
	Body   string
}

// Text is a plain answer.
func Text(s string) Reply { return Reply{Content: s} }

// Calls is a reply with tool calls.
func Calls(calls ...provider.ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call builds a tool call; args is marshalled unless it is a string (sent
// as is, so malformed JSON can be scripted). IDs are assigned by the server
// when empty.
func Call(name string, args any) provider.ToolCall {
	s, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			panic(err)
		}
		s = string(b)
	}
	return provider.ToolCall{Name: name, Arguments: s}
}

// Server is a running fake model server.
type Server struct {
	// URL is the base URL to give the openai provider (ends in /v1).
	URL   string
	Model string
	// ContextWindow is reported in /v1/models as max_model_len (0: none).
	ContextWindow int

	srv    *httptest.Server
	mu     sync.Mutex
	script []Reply
	next   func(n int, body []byte) Reply
	reqs   [][]byte
	ids    int
}

// New starts a server replaying script; it is closed when the test ends.
func New(t testing.TB, model string, script ...Reply) *Server {
	s := &Server{Model: model, script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// NewFunc starts a server that asks fn for the reply to request n (0-based).
func NewFunc(t testing.TB, model string, fn func(n int, body []byte) Reply) *Server {
	s := New(t, model)
	s.next = fn
	return s
}

// Close stops the server. Safe to call twice.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the chat request bodies received so far.
func (s *Server) Requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.reqs...)
}

// Append adds replies to the script.
func (s *Server) Append(r ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, r...)
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		m := map[string]any{"id": s.Model, "object": "model"}
		if s.ContextWindow > 0 {
			m["max_model_len"] = s.ContextWindow
		}
		writeJSON(w, 200, map[string]any{"object": "list", "data": []any{m}})
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, body)
	var rep Reply
	switch {
	case s.next != nil:
		s.mu.Unlock()
		rep = s.next(n, body)
		s.mu.Lock()
	case len(s.script) > 0:
		rep, s.script = s.script[0], s.script[1:]
	default:
		rep = Text("(script exhausted)")
	}
	var calls []map[string]any
	for _, tc := range rep.ToolCalls {
		id := tc.ID
		if id == "" {
			s.ids++
			id = fmt.Sprintf("call_%d", s.ids)
		}
		calls = append(calls, map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
	}
	s.mu.Unlock()
	if rep.Status != 0 || rep.Body != "" {
		st := rep.Status
		if st == 0 {
			st = 200
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		io.WriteString(w, rep.Body)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	if rep.Reasoning != "" {
		f := rep.ReasoningField
		if f == "" {
			f = "reasoning_content"
		}
		msg[f] = rep.Reasoning
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	fr := rep.FinishReason
	if fr == "" {
		fr = "stop"
		if len(calls) > 0 {
			fr = "tool_calls"
		}
	}
	resp := map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "model": s.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": fr}}}
	if !rep.NoUsage {
		u := provider.Usage{PromptTokens: int64(len(body) / 4), CompletionTokens: 10}
		if rep.Usage != nil {
			u = *rep.Usage
		}
		resp["usage"] = map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
			"total_tokens":          u.PromptTokens + u.CompletionTokens,
			"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens}}
	}
	writeJSON(w, 200, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
