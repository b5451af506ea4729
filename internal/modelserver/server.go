// Package modelserver is a scripted model server for tests: one real HTTP
// server on loopback that speaks each wire protocol the agent CLIs use
// (Anthropic Messages, OpenAI chat completions, OpenAI Responses, Gemini
// generateContent), streamed and not, as the real APIs do, plus their
// model-list endpoints. It stands in for the paid APIs and for a local
// model server (LM Studio, Ollama, vLLM, llama.cpp).
//
// It checks every request: a request without the server's Key (in the
// header the protocol uses) is answered 401 in the protocol's error
// format, as the real API would. It records every request (method, path,
// headers, body) so that tests can assert what reached it, e.g. that the
// real key did and the sandbox's placeholder never did.
//
// What it answers is decided by a Script from the parsed Turn (the tools
// offered, how many tool results the conversation holds). The default
// script, WriteFile, makes any coding agent write one file: the first turn
// that offers a write-like tool calls it, later turns answer with text.
//
// It never runs anything it is sent.
package modelserver

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Protocol names a wire protocol.
type Protocol string

const (
	Anthropic Protocol = "anthropic"        // POST /v1/messages
	Chat      Protocol = "openai-chat"      // POST /v1/chat/completions
	Responses Protocol = "openai-responses" // POST /v1/responses
	Gemini    Protocol = "gemini"           // POST /v1beta/models/M:generateContent, :streamGenerateContent
	Models    Protocol = "models"           // GET model lists
	Count     Protocol = "count"            // token counting endpoints
	Other     Protocol = "other"            // anything else (answered 404)
)

// Request is one request the server received.
type Request struct {
	Protocol Protocol
	Method   string
	Path     string // with the query
	Header   http.Header
	Body     []byte
	// Key is the credential the request carried (x-api-key, Authorization
	// Bearer, x-goog-api-key or ?key=), "" when none.
	Key string
}

// Tool is one tool the request offered the model.
type Tool struct {
	Name string
	// Schema is the tool's JSON schema for its input (may be nil, e.g. a
	// freeform/custom tool).
	Schema map[string]any
	// Freeform is set for tools whose input is free text (OpenAI Responses
	// "custom" tools such as codex's apply_patch).
	Freeform bool
}

// Turn is what a script sees of one model request.
type Turn struct {
	Protocol Protocol
	Model    string
	Stream   bool
	Tools    []Tool
	// ToolResults counts the tool results in the conversation so far.
	ToolResults int
	// System and LastUser are the system prompt and the newest user text
	// (best effort, for scripts that tell side requests apart).
	System   string
	LastUser string
	// N is the number of model requests (this protocol or any) before this
	// one.
	N int
	// Body is the raw request body.
	Body []byte
}

// Call is one tool call the script makes.
type Call struct {
	Name string
	Args map[string]any // JSON arguments
	// Input is the raw input of a freeform tool (Responses custom tools).
	Input string
}

// Usage is the token count a reply reports.
type Usage struct {
	Input, Output, Cached int64
}

// Reply is the script's answer to one turn.
type Reply struct {
	Text  string
	Calls []Call
	// Usage defaults to a count derived from the body length.
	Usage *Usage
	// Status, with ErrorMessage, answers with the protocol's error format
	// instead (e.g. 429, 500).
	Status       int
	ErrorMessage string
}

// Script decides the reply to a turn.
type Script func(Turn) Reply

// Server is a running scripted model server.
type Server struct {
	URL   string // http://127.0.0.1:PORT (no path; https:// for NewTLS)
	Key   string // the key every request must carry
	Model string // the model the model lists report

	srv    *httptest.Server
	mu     sync.Mutex
	under  string
	script Script
	reqs   []Request
	n      int
	ids    int
}

// New starts a server requiring key and answering with script (WriteFile
// of "hello.txt" when nil); it is closed when the test ends.
func New(t testing.TB, key, model string, script Script) *Server {
	if script == nil {
		script = WriteFile("hello.txt", "hello from the model\n")
	}
	s := &Server{Key: key, Model: model, script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// NewTLS is New serving https:// with cert (its URL names 127.0.0.1).
func NewTLS(t testing.TB, key, model string, script Script, cert tls.Certificate) *Server {
	if script == nil {
		script = WriteFile("hello.txt", "hello from the model\n")
	}
	s := &Server{Key: key, Model: model, script: script}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	s.URL = s.srv.URL
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// Close stops the server. Safe to call twice.
func (s *Server) Close() { s.srv.Close() }

// Under serves the API under path base only, as a provider whose
// OpenAI-compatible API is not under /v1 (https://open.bigmodel.cn/api/paas/v4):
// base+"/chat/completions", base+"/models". Any other path is answered
// 404, as such a provider does.
func (s *Server) Under(base string) {
	s.mu.Lock()
	s.under = strings.TrimRight(base, "/")
	s.mu.Unlock()
}

// SetScript replaces the script.
func (s *Server) SetScript(sc Script) { s.mu.Lock(); s.script = sc; s.mu.Unlock() }

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ModelRequests returns the requests of protocol p (all model protocols
// when p is "").
func (s *Server) ModelRequests(p Protocol) []Request {
	var out []Request
	for _, r := range s.Requests() {
		switch {
		case p == "" && r.Protocol != Models && r.Protocol != Other && r.Protocol != Count:
			out = append(out, r)
		case p != "" && r.Protocol == p:
			out = append(out, r)
		}
	}
	return out
}

// nextID returns a fresh id with prefix.
func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return prefix + itoa(s.ids)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// requestKey is the credential a request carries, by protocol convention.
func requestKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); a != "" {
		if v, ok := strings.CutPrefix(a, "Bearer "); ok {
			return v
		}
		return a
	}
	return r.URL.Query().Get("key")
}

// classify names the protocol of a request from its method and path.
func classify(r *http.Request) Protocol {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/messages/count_tokens"):
		return Count
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/messages"):
		return Anthropic
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/chat/completions"):
		return Chat
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/responses"):
		return Responses
	case r.Method == http.MethodPost && strings.HasSuffix(p, ":countTokens"):
		return Count
	case r.Method == http.MethodPost && (strings.HasSuffix(p, ":generateContent") || strings.HasSuffix(p, ":streamGenerateContent")):
		return Gemini
	case r.Method == http.MethodGet && (strings.HasSuffix(p, "/models") || strings.Contains(p, "/models/")):
		return Models
	}
	return Other
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := readAll(r)
	proto := classify(r)
	rec := Request{Protocol: proto, Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body, Key: requestKey(r)}
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	n := s.n
	outside := s.under != "" && !strings.HasPrefix(r.URL.Path, s.under+"/")
	if proto != Models && proto != Other && proto != Count && !outside {
		s.n++
	}
	script := s.script
	s.mu.Unlock()
	if outside {
		s.writeError(w, proto, http.StatusNotFound, "no such path: "+r.URL.Path)
		return
	}
	if rec.Key != s.Key {
		s.writeError(w, proto, http.StatusUnauthorized, "invalid api key")
		return
	}
	switch proto {
	case Models:
		s.serveModels(w, r)
	case Count:
		writeJSON(w, 200, map[string]any{"input_tokens": len(body) / 4, "totalTokens": len(body) / 4})
	case Anthropic:
		s.serveAnthropic(w, r, body, n, script)
	case Chat:
		s.serveChat(w, r, body, n, script)
	case Responses:
		s.serveResponses(w, r, body, n, script)
	case Gemini:
		s.serveGemini(w, r, body, n, script)
	default:
		http.NotFound(w, r)
	}
}

// serveModels answers every protocol's model list.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.Contains(r.URL.Path, "/v1beta/") || strings.Contains(r.URL.Path, "/v1alpha/"):
		writeJSON(w, 200, map[string]any{"models": []any{map[string]any{
			"name": "models/" + s.Model, "displayName": s.Model, "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
			"supportedGenerationMethods": []string{"generateContent", "countTokens"}}}})
	case r.Header.Get("anthropic-version") != "":
		writeJSON(w, 200, map[string]any{"data": []any{map[string]any{"type": "model", "id": s.Model, "display_name": s.Model,
			"created_at": "2025-01-01T00:00:00Z"}}, "has_more": false, "first_id": s.Model, "last_id": s.Model})
	default:
		writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{"id": s.Model, "object": "model",
			"created": 1735689600, "owned_by": "modelserver"}}})
	}
}

// writeError answers with the protocol's error format.
func (s *Server) writeError(w http.ResponseWriter, p Protocol, status int, msg string) {
	switch p {
	case Anthropic, Count:
		typ := "api_error"
		switch status {
		case 401:
			typ = "authentication_error"
		case 429:
			typ = "rate_limit_error"
		case 400:
			typ = "invalid_request_error"
		}
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	case Gemini:
		st := "INTERNAL"
		switch status {
		case 401:
			st = "UNAUTHENTICATED"
		case 429:
			st = "RESOURCE_EXHAUSTED"
		case 400:
			st = "INVALID_ARGUMENT"
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}})
	default:
		code := "server_error"
		if status == 401 {
			code = "invalid_api_key"
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": code}})
	}
}

// scriptedError answers a reply that the script made an error (Status
// set) in the protocol's format, and reports whether it was one.
func (s *Server) scriptedError(w http.ResponseWriter, p Protocol, rep Reply) bool {
	if rep.Status == 0 {
		return false
	}
	msg := rep.ErrorMessage
	if msg == "" {
		msg = http.StatusText(rep.Status)
	}
	s.writeError(w, p, rep.Status, msg)
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// usageFor is the reply's usage, or one derived from the body.
func usageFor(rep Reply, body []byte) Usage {
	if rep.Usage != nil {
		return *rep.Usage
	}
	return Usage{Input: int64(len(body)/4 + 1), Output: int64(len(rep.Text)/4 + 5*len(rep.Calls) + 1)}
}
