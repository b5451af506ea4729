package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// The tests run the gateway for real: served on a unix socket (Listen),
// reached by an http.Client dialling that socket, forwarding to upstreams
// on TCP loopback (httptest) that speak each protocol's wire format.

const (
	testToken     = "0123456789abcdef0123456789abcdef"
	realAnthropic = "sk-ant-api03-REAL-anthropic-key-0000"
	realOpenAI    = "sk-proj-REAL-openai-key-1111"
	realGemini    = "AIzaSyREAL-gemini-key-2222"
	realOAuth     = "sk-ant-oat01-REAL-oauth-token-3333"
)

var realKeys = []string{realAnthropic, realOpenAI, realGemini, realOAuth}

// ---- canned wire data, as the real APIs send it ----

const anthropicModel = "claude-sonnet-4-5-20250929"

var anthropicEvents = []string{
	`event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_5m_input_tokens":200,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}

`,
	`event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

`,
	`event: ping
data: {"type": "ping"}

`,
	`event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

`,
	`event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", world"}}

`,
	`event: content_block_stop
data: {"type":"content_block_stop","index":0}

`,
	`event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}

`,
	`event: message_stop
data: {"type":"message_stop"}

`,
}

const anthropicJSON = `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hello, world"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":42,"service_tier":"standard"}}`

const chatModel = "gpt-4o-2024-08-06"

var chatEvents = []string{
	"data: {\"id\":\"chatcmpl-AZ1\",\"object\":\"chat.completion.chunk\",\"created\":1731000000,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_45cf54deae\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
	"data: {\"id\":\"chatcmpl-AZ1\",\"object\":\"chat.completion.chunk\",\"created\":1731000000,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_45cf54deae\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
	"data: {\"id\":\"chatcmpl-AZ1\",\"object\":\"chat.completion.chunk\",\"created\":1731000000,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_45cf54deae\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
	"data: {\"id\":\"chatcmpl-AZ1\",\"object\":\"chat.completion.chunk\",\"created\":1731000000,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_45cf54deae\",\"choices\":[],\"usage\":{\"prompt_tokens\":1500,\"completion_tokens\":30,\"total_tokens\":1530,\"prompt_tokens_details\":{\"cached_tokens\":1024,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n",
	"data: [DONE]\n\n",
}

const chatJSON = `{"id":"chatcmpl-AZ1","object":"chat.completion","created":1731000000,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1500,"completion_tokens":30,"total_tokens":1530,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"system_fingerprint":"fp_45cf54deae"}`

const responsesModel = "gpt-5-2025-08-07"

var responsesEvents = []string{
	`event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68a1","object":"response","created_at":1755000000,"status":"in_progress","model":"gpt-5-2025-08-07","output":[],"usage":null}}

`,
	`event: response.in_progress
data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68a1","object":"response","created_at":1755000000,"status":"in_progress","model":"gpt-5-2025-08-07","output":[],"usage":null}}

`,
	`event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_68a1","type":"message","status":"in_progress","content":[],"role":"assistant"}}

`,
	`event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_68a1","output_index":0,"content_index":0,"delta":"Hello","logprobs":[]}

`,
	`event: response.output_text.done
data: {"type":"response.output_text.done","sequence_number":4,"item_id":"msg_68a1","output_index":0,"content_index":0,"text":"Hello","logprobs":[]}

`,
	`event: response.completed
data: {"type":"response.completed","sequence_number":5,"response":{"id":"resp_68a1","object":"response","created_at":1755000000,"status":"completed","model":"gpt-5-2025-08-07","output":[{"id":"msg_68a1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hello"}],"role":"assistant"}],"usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1500},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":2300}}}

`,
}

const responsesJSON = `{"id":"resp_68a1","object":"response","created_at":1755000000,"status":"completed","model":"gpt-5-2025-08-07","output":[{"id":"msg_68a1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hello"}],"role":"assistant"}],"usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1500},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":2300}}`

const geminiModel = "gemini-2.5-flash"

// Gemini's alt=sse stream ends its events with CRLF CRLF.
var geminiEvents = []string{
	"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hel\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 800,\"totalTokenCount\": 800,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 800}]},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"Yx2aaO2\"}\r\n\r\n",
	"data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"lo\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 800,\"candidatesTokenCount\": 20,\"totalTokenCount\": 870,\"cachedContentTokenCount\": 512,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 800}],\"thoughtsTokenCount\": 50},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"Yx2aaO2\"}\r\n\r\n",
}

// geminiArray is streamGenerateContent without alt=sse: one JSON array.
const geminiArray = `[{
  "candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}],
  "usageMetadata": {"promptTokenCount": 800,"totalTokenCount": 800},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "Yx2aaO2"
}
,
{
  "candidates": [{"content": {"parts": [{"text": "lo"}],"role": "model"},"finishReason": "STOP","index": 0}],
  "usageMetadata": {"promptTokenCount": 800,"candidatesTokenCount": 20,"totalTokenCount": 870,"cachedContentTokenCount": 512,"thoughtsTokenCount": 50},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "Yx2aaO2"
}
]`

const geminiJSON = `{
  "candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"finishReason": "STOP","index": 0}],
  "usageMetadata": {"promptTokenCount": 800,"candidatesTokenCount": 20,"totalTokenCount": 870,"cachedContentTokenCount": 512,"thoughtsTokenCount": 50},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "Yx2aaO2"
}`

const modelsJSON = `{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"}]}`

// What the canned responses meter to (Anthropic input = input_tokens +
// cache reads + cache writes; Gemini output = candidates + thoughts).
var (
	anthropicTokens = Tokens{Input: 12 + 1000 + 200, Output: 42, Cached: 1000, CacheWrite: 200}
	chatTokens      = Tokens{Input: 1500, Output: 30, Cached: 1024}
	responsesTokens = Tokens{Input: 2000, Output: 300, Cached: 1500}
	geminiTokens    = Tokens{Input: 800, Output: 70, Cached: 512}
)

// The built-in list prices of those (USD per million tokens).
const (
	anthropicCost = (12*3 + 1000*0.3 + 200*3.75 + 42*15) / 1e6 // claude-sonnet-4
	chatCost      = (476*2.5 + 1024*1.25 + 30*10) / 1e6        // gpt-4o
	responsesCost = (500*1.25 + 1500*0.125 + 300*10) / 1e6     // gpt-5
	geminiCost    = (288*0.3 + 512*0.03 + 70*2.5) / 1e6        // gemini-2.5-flash
)

// ---- the fake upstream ----

type recorded struct {
	Method   string
	Path     string
	RawQuery string
	Host     string
	Header   http.Header
	Body     []byte
}

type upstream struct {
	srv  *httptest.Server
	url  *url.URL
	mu   sync.Mutex
	reqs []recorded
}

// newUpstream serves h (nil: modelAPI(nil)) on TCP loopback and records
// every request that reaches it.
func newUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	if h == nil {
		h = modelAPI(nil)
	}
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Clone(), body})
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	t.Cleanup(u.srv.Close)
	u.url, _ = url.Parse(u.srv.URL)
	return u
}

func (u *upstream) requests() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

func (u *upstream) hits() int { return len(u.requests()) }

func (u *upstream) last(t testing.TB) recorded {
	t.Helper()
	r := u.requests()
	if len(r) == 0 {
		t.Fatal("no request reached the upstream")
	}
	return r[len(r)-1]
}

// modelAPI answers like the providers' APIs. A non-nil gate holds a
// stream after its first event until the gate is closed.
func modelAPI(gate <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		p := r.URL.Path
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(p, "/models"):
			writeJSON(w, modelsJSON)
		case strings.HasSuffix(p, "/v1/messages"):
			if req.Stream {
				writeSSE(w, r, anthropicEvents, gate)
			} else {
				writeJSON(w, anthropicJSON)
			}
		case strings.HasSuffix(p, "/v1/chat/completions"):
			if req.Stream {
				writeSSE(w, r, chatEvents, gate)
			} else {
				writeJSON(w, chatJSON)
			}
		case strings.HasSuffix(p, "/v1/responses"):
			if req.Stream {
				writeSSE(w, r, responsesEvents, gate)
			} else {
				writeJSON(w, responsesJSON)
			}
		case strings.HasSuffix(p, ":streamGenerateContent"):
			if r.URL.Query().Get("alt") == "sse" {
				writeSSE(w, r, geminiEvents, gate)
			} else {
				writeJSON(w, geminiArray)
			}
		case strings.HasSuffix(p, ":generateContent"):
			writeJSON(w, geminiJSON)
		default:
			http.NotFound(w, r)
		}
	}
}

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, body)
}

func writeSSE(w http.ResponseWriter, r *http.Request, events []string, gate <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	for i, ev := range events {
		_, _ = io.WriteString(w, ev)
		f.Flush()
		if i == 0 && gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
				return
			}
		}
	}
}

// ---- the gateway under test ----

type eventLog struct {
	mu sync.Mutex
	ev []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ev)
}

func (l *eventLog) kind(k string) []Event {
	var out []Event
	for _, e := range l.all() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

type testGW struct {
	*Gateway
	sock     string
	client   *http.Client
	events   *eventLog
	exceeded atomic.Int32
	reasons  chan string
}

// startGateway serves a gateway with o (Token defaults to testToken) on a
// unix socket and returns a client that dials it.
func startGateway(t testing.TB, o Options) *testGW {
	t.Helper()
	if o.Token == "" {
		o.Token = testToken
	}
	if o.Redial == nil {
		o.Redial = []time.Duration{} // a dead upstream answers at once (TestRedial tries again)
	}
	tg := &testGW{events: &eventLog{}, reasons: make(chan string, 64)}
	prevEv, prevEx := o.OnEvent, o.OnExceeded
	o.OnEvent = func(e Event) {
		tg.events.add(e)
		if prevEv != nil {
			prevEv(e)
		}
	}
	o.OnExceeded = func(why string) {
		tg.exceeded.Add(1)
		tg.reasons <- why
		if prevEx != nil {
			prevEx(why)
		}
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir can be longer than a unix socket path may be.
	dir, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tg.sock = filepath.Join(dir, "gw.sock")
	if err := g.Listen(tg.sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	tg.Gateway = g
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", tg.sock)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
	}
	t.Cleanup(tr.CloseIdleConnections)
	tg.client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	return tg
}

func testRoutes(up *url.URL) map[string]Route {
	return map[string]Route{
		RouteAnthropic: {Upstream: up, Credential: Credential{Header: "x-api-key", Value: realAnthropic, Source: "ANTHROPIC_API_KEY"}},
		RouteOpenAI:    {Upstream: up, Credential: Credential{Header: "authorization", Value: realOpenAI, Source: "OPENAI_API_KEY"}},
		RouteGemini:    {Upstream: up, Credential: Credential{Header: "x-goog-api-key", Value: realGemini, Source: "GEMINI_API_KEY"}},
		"claude-oauth": {Upstream: up, Credential: Credential{Header: "authorization", Value: realOAuth, Source: "CLAUDE_CODE_OAUTH_TOKEN",
			Extra: map[string]string{"anthropic-beta": "oauth-2025-04-20"}}},
	}
}

// do sends one request through the gateway and reads the whole answer.
func (tg *testGW) do(t testing.TB, method, path string, hdr http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := tg.send(method, path, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp, b
}

func (tg *testGW) send(method, path string, hdr http.Header, body string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://gateway"+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return tg.client.Do(req)
}

// waitUsage waits until n responses are metered.
func (tg *testGW) waitUsage(t testing.TB, n int64) Usage {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		u := tg.Usage()
		if u.Requests >= n {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d responses metered, want %d: %+v", u.Requests, n, u)
		}
		time.Sleep(time.Millisecond)
	}
}

// ---- protocols ----

type proto struct {
	name     string
	route    string
	path     string // after /<route>
	body     string
	keyHdr   func(key string) http.Header // the agent's way to send its key
	upHeader string                       // where the upstream wants the real key
	upValue  string
	events   []string // the stream it answers (nil: not streamed)
	whole    string   // the non-streamed answer
	model    string
	tokens   Tokens
	cost     float64
}

func xAPIKey(k string) http.Header {
	return http.Header{"X-Api-Key": {k}, "Anthropic-Version": {"2023-06-01"}}
}
func bearerKey(k string) http.Header {
	return http.Header{"Authorization": {"Bearer " + k}}
}
func googKey(k string) http.Header { return http.Header{"X-Goog-Api-Key": {k}} }

var protos = []proto{
	{name: "anthropic-stream", route: RouteAnthropic, path: "/v1/messages",
		body:   `{"model":"claude-sonnet-4-5-20250929","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
		keyHdr: xAPIKey, upHeader: "X-Api-Key", upValue: realAnthropic, events: anthropicEvents,
		model: anthropicModel, tokens: anthropicTokens, cost: anthropicCost},
	{name: "anthropic", route: RouteAnthropic, path: "/v1/messages",
		body:   `{"model":"claude-sonnet-4-5-20250929","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}]}`,
		keyHdr: xAPIKey, upHeader: "X-Api-Key", upValue: realAnthropic, whole: anthropicJSON,
		model: anthropicModel, tokens: anthropicTokens, cost: anthropicCost},
	{name: "chat-stream", route: RouteOpenAI, path: "/v1/chat/completions",
		body:   `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
		keyHdr: bearerKey, upHeader: "Authorization", upValue: "Bearer " + realOpenAI, events: chatEvents,
		model: chatModel, tokens: chatTokens, cost: chatCost},
	{name: "chat", route: RouteOpenAI, path: "/v1/chat/completions",
		body:   `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}`,
		keyHdr: bearerKey, upHeader: "Authorization", upValue: "Bearer " + realOpenAI, whole: chatJSON,
		model: chatModel, tokens: chatTokens, cost: chatCost},
	{name: "responses-stream", route: RouteOpenAI, path: "/v1/responses",
		body:   `{"model":"gpt-5","stream":true,"input":"Hi"}`,
		keyHdr: bearerKey, upHeader: "Authorization", upValue: "Bearer " + realOpenAI, events: responsesEvents,
		model: responsesModel, tokens: responsesTokens, cost: responsesCost},
	{name: "responses", route: RouteOpenAI, path: "/v1/responses",
		body:   `{"model":"gpt-5","input":"Hi"}`,
		keyHdr: bearerKey, upHeader: "Authorization", upValue: "Bearer " + realOpenAI, whole: responsesJSON,
		model: responsesModel, tokens: responsesTokens, cost: responsesCost},
	{name: "gemini-stream-sse", route: RouteGemini, path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		body:   `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`,
		keyHdr: googKey, upHeader: "X-Goog-Api-Key", upValue: realGemini, events: geminiEvents,
		model: geminiModel, tokens: geminiTokens, cost: geminiCost},
	{name: "gemini-stream-array", route: RouteGemini, path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		body:   `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`,
		keyHdr: googKey, upHeader: "X-Goog-Api-Key", upValue: realGemini, whole: geminiArray,
		model: geminiModel, tokens: geminiTokens, cost: geminiCost},
	{name: "gemini", route: RouteGemini, path: "/v1beta/models/gemini-2.5-flash:generateContent",
		body:   `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`,
		keyHdr: googKey, upHeader: "X-Goog-Api-Key", upValue: realGemini, whole: geminiJSON,
		model: geminiModel, tokens: geminiTokens, cost: geminiCost},
}

func (p proto) answer() string {
	if p.events != nil {
		return strings.Join(p.events, "")
	}
	return p.whole
}

func protoByName(t testing.TB, name string) proto {
	for _, p := range protos {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("no protocol %s", name)
	return proto{}
}

// errorBody checks that b is the protocol's error format for status and
// returns its message.
func errorBody(t testing.TB, route string, status int, b []byte) string {
	t.Helper()
	switch route {
	case RouteAnthropic, "claude-oauth":
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
			t.Fatalf("not an Anthropic error (%v): %s", err, b)
		}
		want := map[int]string{401: "authentication_error", 400: "invalid_request_error", 404: "not_found_error", 502: "api_error", 503: "api_error"}[status]
		if e.Error.Type != want {
			t.Errorf("Anthropic error type %q for %d, want %q", e.Error.Type, status, want)
		}
		return e.Error.Message
	case RouteGemini:
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
			t.Fatalf("not a Gemini error (%v): %s", err, b)
		}
		want := map[int]string{401: "UNAUTHENTICATED", 400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 502: "UNAVAILABLE", 503: "UNAVAILABLE"}[status]
		if e.Error.Code != status || e.Error.Status != want {
			t.Errorf("Gemini error code %d status %q, want %d %q", e.Error.Code, e.Error.Status, status, want)
		}
		return e.Error.Message
	default:
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == nil {
			t.Fatalf("not an OpenAI error (%v): %s", err, b)
		}
		if status == 401 && *e.Error.Code != "invalid_api_key" {
			t.Errorf("OpenAI error code %q for 401, want invalid_api_key", *e.Error.Code)
		}
		return e.Error.Message
	}
}

func noKeyIn(t testing.TB, what, s string) {
	t.Helper()
	for _, k := range realKeys {
		if strings.Contains(s, k) {
			t.Errorf("%s contains the real key %q", what, k)
		}
	}
}

// ---- tests ----

func TestNewAndPlaceholder(t *testing.T) {
	if _, err := New(Options{Token: "short"}); err == nil {
		t.Error("New accepted a 5-character token")
	}
	a, b := NewToken(), NewToken()
	if len(a) != 48 || a == b {
		t.Errorf("NewToken: %q, %q", a, b)
	}
	g, err := New(Options{Token: a})
	if err != nil {
		t.Fatal(err)
	}
	if g.Placeholder() != KeyPrefix+a {
		t.Errorf("Placeholder %q", g.Placeholder())
	}
}

func TestListenSocketMode(t *testing.T) {
	tg := startGateway(t, Options{})
	fi, err := os.Stat(tg.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a 0600 socket", fi.Mode())
	}
}

func TestRefusesWithoutToken(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	wrong := KeyPrefix + "fedcba9876543210fedcba9876543210"
	for _, p := range protos {
		for _, c := range []struct {
			name string
			hdr  http.Header
		}{
			{"none", http.Header{}},
			{"wrong", p.keyHdr(wrong)},
			{"bare-token", p.keyHdr(testToken)},
			{"real-key", p.keyHdr(strings.TrimPrefix(p.upValue, "Bearer "))},
			{"prefix", p.keyHdr(tg.Placeholder()[:len(tg.Placeholder())-1])},
		} {
			resp, b := tg.do(t, "POST", "/"+p.route+p.path, c.hdr, p.body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s, %s key: status %d, want 401: %s", p.name, c.name, resp.StatusCode, b)
				continue
			}
			if msg := errorBody(t, p.route, 401, b); !strings.Contains(msg, "gateway key") {
				t.Errorf("%s: message %q", p.name, msg)
			}
		}
	}
	// A model list needs the token too.
	if resp, _ := tg.do(t, "GET", "/openai/v1/models", nil, ""); resp.StatusCode != 401 {
		t.Errorf("GET models without a key: %d", resp.StatusCode)
	}
	if n := up.hits(); n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	if n := len(tg.events.kind("refused")); n == 0 {
		t.Error("no refused event")
	}
}

func TestTokenAcceptedInEveryPlace(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	key := tg.Placeholder()
	gem := protoByName(t, "gemini")
	for _, c := range []struct {
		name, path string
		hdr        http.Header
	}{
		{"x-api-key", "/gemini" + gem.path, http.Header{"X-Api-Key": {key}}},
		{"bearer", "/gemini" + gem.path, http.Header{"Authorization": {"Bearer " + key}}},
		{"bearer-lower", "/gemini" + gem.path, http.Header{"Authorization": {"bearer " + key}}},
		{"x-goog-api-key", "/gemini" + gem.path, http.Header{"X-Goog-Api-Key": {key}}},
		{"query", "/gemini" + gem.path + "?key=" + url.QueryEscape(key), nil},
	} {
		resp, b := tg.do(t, "POST", c.path, c.hdr, gem.body)
		if resp.StatusCode != 200 || string(b) != geminiJSON {
			t.Errorf("token in %s: %d %s", c.name, resp.StatusCode, b)
		}
	}
	if n := up.hits(); n != 5 {
		t.Errorf("%d requests reached the upstream, want 5", n)
	}
}

func TestForwardsWithRealKey(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	key := tg.Placeholder()
	for _, p := range protos {
		// Every place a key may be, so that each must be removed.
		hdr := p.keyHdr(key)
		hdr.Set("Cookie", "session="+key)
		hdr.Set("X-Forwarded-For", "10.0.0.7")
		for h, v := range map[string]string{"X-Api-Key": key, "X-Goog-Api-Key": key, "Authorization": "Bearer " + key} {
			if hdr.Get(h) == "" {
				hdr.Set(h, v)
			}
		}
		path := p.path
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "key=" + url.QueryEscape(key)
		resp, b := tg.do(t, "POST", "/"+p.route+path, hdr, p.body)
		if resp.StatusCode != 200 || string(b) != p.answer() {
			t.Errorf("%s: %d, answer changed:\n%s", p.name, resp.StatusCode, b)
		}
		r := up.last(t)
		wantPath, wantQuery, _ := strings.Cut(p.path, "?")
		if r.Path != wantPath || r.RawQuery != wantQuery {
			t.Errorf("%s: upstream got %s?%s, want %s?%s", p.name, r.Path, r.RawQuery, wantPath, wantQuery)
		}
		if r.Host != up.url.Host {
			t.Errorf("%s: upstream Host %q", p.name, r.Host)
		}
		if got := r.Header.Values(p.upHeader); len(got) != 1 || got[0] != p.upValue {
			t.Errorf("%s: upstream %s = %q, want %q", p.name, p.upHeader, got, p.upValue)
		}
		for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Cookie", "X-Forwarded-For"} {
			if h != p.upHeader && r.Header.Get(h) != "" {
				t.Errorf("%s: upstream got %s: %q", p.name, h, r.Header.Get(h))
			}
		}
		all := fmt.Sprint(r.Header) + r.Path + r.RawQuery + string(r.Body)
		if strings.Contains(all, testToken) {
			t.Errorf("%s: the placeholder reached the upstream: %s", p.name, all)
		}
		noKeyIn(t, p.name+": the answer", fmt.Sprint(resp.Header)+string(b))
	}
}

func TestExtraHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	p := protoByName(t, "anthropic")
	for _, c := range []struct{ have, want string }{
		{"", "oauth-2025-04-20"},
		{"prompt-caching-2024-07-31", "prompt-caching-2024-07-31,oauth-2025-04-20"},
		{"interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14", "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,oauth-2025-04-20"},
		// Already there: nothing is added and nothing the agent sent is lost.
		{"oauth-2025-04-20", "oauth-2025-04-20"},
		{"claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14", "claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14"},
	} {
		hdr := xAPIKey(tg.Placeholder())
		if c.have != "" {
			hdr.Set("Anthropic-Beta", c.have)
		}
		resp, b := tg.do(t, "POST", "/claude-oauth"+p.path, hdr, p.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		r := up.last(t)
		if got := strings.Join(r.Header.Values("Anthropic-Beta"), ","); got != c.want {
			t.Errorf("agent sent anthropic-beta %q: upstream got %q, want %q", c.have, got, c.want)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+realOAuth {
			t.Errorf("upstream Authorization %q", got)
		}
		if r.Header.Get("X-Api-Key") != "" {
			t.Errorf("upstream got x-api-key %q", r.Header.Get("X-Api-Key"))
		}
	}
}

func TestUpstreamPathPrefix(t *testing.T) {
	up := newUpstream(t, nil)
	base := *up.url
	base.Path = "/proxy/anthropic/"
	tg := startGateway(t, Options{Routes: map[string]Route{RouteAnthropic: {Upstream: &base}}})
	p := protoByName(t, "anthropic")
	resp, b := tg.do(t, "POST", "/anthropic"+p.path, xAPIKey(tg.Placeholder()), p.body)
	if resp.StatusCode != 200 {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	r := up.last(t)
	if r.Path != "/proxy/anthropic/v1/messages" {
		t.Errorf("upstream path %q", r.Path)
	}
	// A route with no credential header sends none.
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
		if r.Header.Get(h) != "" {
			t.Errorf("keyless route sent %s", h)
		}
	}
}

// readEvent reads one SSE event (up to its blank line) from br.
func readEvent(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return sb.String(), err
		}
		if strings.TrimRight(line, "\r\n") == "" {
			return sb.String(), nil
		}
	}
}

func TestStreamNotBuffered(t *testing.T) {
	for _, p := range protos {
		if p.events == nil {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			gate := make(chan struct{})
			up := newUpstream(t, modelAPI(gate))
			tg := startGateway(t, Options{Routes: testRoutes(up.url)})
			resp, err := tg.send("POST", "/"+p.route+p.path, p.keyHdr(tg.Placeholder()), p.body)
			if err != nil {
				close(gate)
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type %q", ct)
			}
			br := bufio.NewReader(resp.Body)
			first := make(chan string, 1)
			go func() {
				ev, _ := readEvent(br)
				first <- ev
			}()
			select {
			case ev := <-first:
				if ev != p.events[0] {
					t.Errorf("first event %q, want %q", ev, p.events[0])
				}
			case <-time.After(5 * time.Second):
				close(gate)
				t.Fatal("the first event did not come through while the upstream held the rest: the gateway buffers")
			}
			if n := tg.Usage().Requests; n != 0 {
				t.Errorf("metered before the stream ended: %d", n)
			}
			close(gate)
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.events[0] + string(rest); got != p.answer() {
				t.Errorf("stream changed:\n%s", got)
			}
			u := tg.waitUsage(t, 1)
			if u.Models[p.model].PromptTokens != p.tokens.Input {
				t.Errorf("metered %+v", u)
			}
		})
	}
}

func TestChatStreamAsksForUsage(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	key := bearerKey(tg.Placeholder())
	for _, c := range []struct {
		name, body string
		want       map[string]any // stream_options upstream (nil: body unchanged)
	}{
		{"stream", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"a < b"}]}`, map[string]any{"include_usage": true}},
		{"include-false", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false},"messages":[]}`, map[string]any{"include_usage": true}},
		{"other-option", `{"model":"gpt-4o","stream":true,"stream_options":{"include_obfuscation":false},"messages":[]}`, map[string]any{"include_usage": true, "include_obfuscation": false}},
		{"already", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, nil},
		{"not-streamed", `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}`, nil},
		{"stream-false", `{"model":"gpt-4o","stream":false,"messages":[]}`, nil},
	} {
		resp, b := tg.do(t, "POST", "/openai/v1/chat/completions", key, c.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, b)
		}
		r := up.last(t)
		if c.want == nil {
			if string(r.Body) != c.body {
				t.Errorf("%s: body changed: %s", c.name, r.Body)
			}
			continue
		}
		var got struct {
			Model         string          `json:"model"`
			Stream        bool            `json:"stream"`
			StreamOptions map[string]any  `json:"stream_options"`
			Messages      json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatalf("%s: upstream body %s: %v", c.name, r.Body, err)
		}
		if fmt.Sprint(got.StreamOptions) != fmt.Sprint(c.want) || !got.Stream || got.Model != "gpt-4o" || len(got.Messages) == 0 {
			t.Errorf("%s: upstream got %s", c.name, r.Body)
		}
		if cl := r.Header.Get("Content-Length"); cl != "" && cl != fmt.Sprint(len(r.Body)) {
			t.Errorf("%s: Content-Length %s for %d bytes", c.name, cl, len(r.Body))
		}
	}
	// Responses requests are left as they are.
	body := `{"model":"gpt-5","stream":true,"input":"Hi"}`
	tg.do(t, "POST", "/openai/v1/responses", key, body)
	if r := up.last(t); string(r.Body) != body {
		t.Errorf("responses body changed: %s", r.Body)
	}
}

func TestUnknownRoute(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	resp, b := tg.do(t, "POST", "/mistral/v1/messages", xAPIKey(tg.Placeholder()), `{}`)
	if resp.StatusCode != 404 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	msg := errorBody(t, RouteAnthropic, 404, b)
	if !strings.Contains(msg, `"mistral"`) || !strings.Contains(msg, "anthropic, claude-oauth, gemini, openai") {
		t.Errorf("message %q", msg)
	}
	resp, b = tg.do(t, "GET", "/", bearerKey(tg.Placeholder()), "")
	if resp.StatusCode != 404 {
		t.Errorf("GET /: %d %s", resp.StatusCode, b)
	}
	if up.hits() != 0 {
		t.Error("reached the upstream")
	}
}

// deadURL is a loopback address nothing listens on.
func deadURL(t testing.TB) *url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &url.URL{Scheme: "http", Host: addr}
}

func TestUnreachableUpstream(t *testing.T) {
	dead := deadURL(t)
	dead.RawQuery = "token=secret"
	tg := startGateway(t, Options{Routes: testRoutes(dead)})
	for _, p := range protos {
		resp, b := tg.do(t, "POST", "/"+p.route+p.path, p.keyHdr(tg.Placeholder()), p.body)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%s: %d %s", p.name, resp.StatusCode, b)
			continue
		}
		msg := errorBody(t, p.route, 502, b)
		if !strings.Contains(msg, dead.Host) || strings.Contains(msg, "secret") {
			t.Errorf("%s: message %q", p.name, msg)
		}
	}
	ev := tg.events.kind("upstream_error")
	if len(ev) != len(protos) {
		t.Fatalf("%d upstream_error events, want %d", len(ev), len(protos))
	}
	if ev[0].Data["upstream"] != "http://"+dead.Host || ev[0].Data["route"] == "" {
		t.Errorf("event %+v", ev[0])
	}
	if u := tg.Usage(); u.Requests != 0 {
		t.Errorf("metered %+v", u)
	}
}

func TestUpstreamRefusesKey(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	})
	tg := startGateway(t, Options{Routes: testRoutes(up.url)})
	p := protoByName(t, "anthropic")
	resp, b := tg.do(t, "POST", "/anthropic"+p.path, p.keyHdr(tg.Placeholder()), p.body)
	if resp.StatusCode != 401 || !strings.Contains(string(b), "invalid x-api-key") {
		t.Errorf("the upstream's answer was not passed on: %d %s", resp.StatusCode, b)
	}
	ev := tg.events.kind("upstream_error")
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "ANTHROPIC_API_KEY") || !strings.Contains(ev[0].Message, up.url.Host) ||
		ev[0].Data["status"] != 401 || ev[0].Data["key"] != "ANTHROPIC_API_KEY" || ev[0].Data["upstream"] != "http://"+up.url.Host {
		t.Errorf("events %+v", ev)
	}
	if u := tg.Usage(); u.Requests != 0 {
		t.Errorf("an error was metered: %+v", u)
	}
	// A model server agentrun has no key for: the event says so, not
	// "the key from " and nothing.
	routes := testRoutes(up.url)
	routes[RouteOpenAI] = Route{Upstream: up.url}
	tg = startGateway(t, Options{Routes: routes})
	p = protoByName(t, "chat")
	tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
	ev = tg.events.kind("upstream_error")
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "without a key") || ev[0].Data["key"] != "" {
		t.Errorf("events %+v", ev)
	}
}

func TestEventsNeverCarryKeys(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/v1/responses") {
			w.WriteHeader(403)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"my-model","usage":{"input_tokens":5,"output_tokens":5}}`)
	})
	routes := testRoutes(up.url)
	routes["dead"] = Route{Upstream: deadURL(t), Credential: Credential{Header: "x-api-key", Value: realAnthropic}}
	tg := startGateway(t, Options{Routes: routes, Budget: Budget{MaxTokens: 20}})
	key := tg.Placeholder()
	tg.do(t, "POST", "/anthropic/v1/messages?key="+realAnthropic, xAPIKey(realAnthropic), `{}`) // refused
	tg.do(t, "POST", "/dead/v1/messages", xAPIKey(key), `{}`)
	tg.do(t, "POST", "/openai/v1/responses", bearerKey(key), `{}`)
	tg.do(t, "POST", "/anthropic/v1/messages", xAPIKey(key), `{}`)
	tg.do(t, "POST", "/anthropic/v1/messages", xAPIKey(key), `{}`)
	tg.waitUsage(t, 2)
	tg.do(t, "POST", "/anthropic/v1/messages", xAPIKey(key), `{}`) // over budget
	kinds := map[string]bool{}
	for _, e := range tg.events.all() {
		kinds[e.Kind] = true
		s := fmt.Sprintf("%s %v", e.Message, e.Data)
		noKeyIn(t, "event "+e.Kind, s)
		if strings.Contains(s, testToken) {
			t.Errorf("event %s carries the run token: %s", e.Kind, s)
		}
	}
	for _, k := range []string{"refused", "upstream_error", "unpriced", "budget_exceeded"} {
		if !kinds[k] {
			t.Errorf("no %s event among %v", k, kinds)
		}
	}
}

// ---- budgets ----

func TestBudgetMaxTokens(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url), Budget: Budget{MaxTokens: 2000}})
	p := protoByName(t, "anthropic")
	hdr := p.keyHdr(tg.Placeholder())
	for i := 1; i <= 2; i++ { // 1254 tokens each: the second still starts under 2000
		if resp, b := tg.do(t, "POST", "/anthropic"+p.path, hdr, p.body); resp.StatusCode != 200 {
			t.Fatalf("request %d under the budget: %d %s", i, resp.StatusCode, b)
		}
		tg.waitUsage(t, int64(i))
	}
	if tg.Exceeded() != "" || tg.exceeded.Load() != 0 {
		t.Fatal("exceeded before a request was refused")
	}
	for i := range 3 {
		resp, b := tg.do(t, "POST", "/anthropic"+p.path, hdr, p.body)
		if resp.StatusCode != 400 {
			t.Fatalf("request over the budget (%d): %d %s", i, resp.StatusCode, b)
		}
		msg := errorBody(t, RouteAnthropic, 400, b)
		for _, want := range []string{"token budget", "2508", "--max-tokens 2000", "agentrun resume"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
	}
	// Other protocols are refused too, in their format.
	for _, name := range []string{"chat", "gemini"} {
		q := protoByName(t, name)
		resp, b := tg.do(t, "POST", "/"+q.route+q.path, q.keyHdr(tg.Placeholder()), q.body)
		if resp.StatusCode != 400 {
			t.Fatalf("%s over the budget: %d", name, resp.StatusCode)
		}
		if msg := errorBody(t, q.route, 400, b); !strings.Contains(msg, "agentrun resume") {
			t.Errorf("%s: %q", name, msg)
		}
	}
	if n := up.hits(); n != 2 {
		t.Errorf("%d requests reached the upstream, want 2", n)
	}
	// A model list is not a model request.
	if resp, _ := tg.do(t, "GET", "/openai/v1/models", bearerKey(tg.Placeholder()), ""); resp.StatusCode != 200 {
		t.Errorf("GET models over the budget: %d", resp.StatusCode)
	}
	if n := tg.exceeded.Load(); n != 1 {
		t.Errorf("OnExceeded called %d times", n)
	}
	if why := <-tg.reasons; !strings.Contains(why, "token budget") || tg.Exceeded() != why {
		t.Errorf("OnExceeded(%q), Exceeded() %q", why, tg.Exceeded())
	}
	ev := tg.events.kind("budget_exceeded")
	if len(ev) != 1 || ev[0].Data["tokens"] != int64(2508) {
		t.Errorf("budget_exceeded events %+v", ev)
	}
}

func TestBudgetMaxCost(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url), Budget: Budget{MaxCost: 0.005}})
	p := protoByName(t, "chat-stream")
	hdr := p.keyHdr(tg.Placeholder())
	for i := 1; i <= 2; i++ { // $0.00277 each
		if resp, b := tg.do(t, "POST", "/openai"+p.path, hdr, p.body); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
		tg.waitUsage(t, int64(i))
	}
	resp, b := tg.do(t, "POST", "/openai"+p.path, hdr, p.body)
	if resp.StatusCode != 400 {
		t.Fatalf("over the cost budget: %d %s", resp.StatusCode, b)
	}
	msg := errorBody(t, RouteOpenAI, 400, b)
	for _, want := range []string{"cost budget", "$0.0055", "--max-cost $0.005", "agentrun resume"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	if e.Error.Code != "budget_exceeded" {
		t.Errorf("code %q", e.Error.Code)
	}
	if up.hits() != 2 || tg.exceeded.Load() != 1 || len(tg.events.kind("budget_exceeded")) != 1 {
		t.Errorf("hits %d, OnExceeded %d, events %v", up.hits(), tg.exceeded.Load(), tg.events.kind("budget_exceeded"))
	}
}

func TestBudgetCountsSpent(t *testing.T) {
	up := newUpstream(t, nil)
	spent := &Usage{PromptTokens: 900, CompletionTokens: 100, Requests: 4, CostUSD: 0.01}
	tg := startGateway(t, Options{Routes: testRoutes(up.url), Budget: Budget{MaxTokens: 1000}, Spent: spent})
	p := protoByName(t, "gemini")
	resp, b := tg.do(t, "POST", "/gemini"+p.path, p.keyHdr(tg.Placeholder()), p.body)
	if resp.StatusCode != 400 {
		t.Fatalf("a resumed run past its budget: %d %s", resp.StatusCode, b)
	}
	if msg := errorBody(t, RouteGemini, 400, b); !strings.Contains(msg, "1000 of --max-tokens 1000") {
		t.Errorf("message %q", msg)
	}
	if up.hits() != 0 || tg.exceeded.Load() != 1 {
		t.Errorf("hits %d, OnExceeded %d", up.hits(), tg.exceeded.Load())
	}

	// Under the cost budget with Spent ($0.01), one more request ($0.00028) goes, then no more.
	up2 := newUpstream(t, nil)
	tg2 := startGateway(t, Options{Routes: testRoutes(up2.url), Budget: Budget{MaxCost: 0.0102}, Spent: spent})
	if resp, _ := tg2.do(t, "POST", "/gemini"+p.path, p.keyHdr(tg2.Placeholder()), p.body); resp.StatusCode != 200 {
		t.Fatalf("under the budget: %d", resp.StatusCode)
	}
	tg2.waitUsage(t, 5)
	if resp, _ := tg2.do(t, "POST", "/gemini"+p.path, p.keyHdr(tg2.Placeholder()), p.body); resp.StatusCode != 400 {
		t.Errorf("past Spent + one request: %d", resp.StatusCode)
	}
	if up2.hits() != 1 || tg2.exceeded.Load() != 1 {
		t.Errorf("hits %d, OnExceeded %d", up2.hits(), tg2.exceeded.Load())
	}
}

func TestBudgetExceededOnceUnderConcurrency(t *testing.T) {
	up := newUpstream(t, nil)
	tg := startGateway(t, Options{Routes: testRoutes(up.url), Budget: Budget{MaxTokens: 1}, Spent: &Usage{PromptTokens: 1}})
	p := protoByName(t, "responses")
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 16 {
		wg.Go(func() {
			resp, err := tg.send("POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 400 {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if refused.Load() != 16 || up.hits() != 0 {
		t.Errorf("%d of 16 refused, %d reached the upstream", refused.Load(), up.hits())
	}
	if n := tg.exceeded.Load(); n != 1 {
		t.Errorf("OnExceeded called %d times", n)
	}
	if n := len(tg.events.kind("budget_exceeded")); n != 1 {
		t.Errorf("%d budget_exceeded events", n)
	}
}

// ---- routes ----

func TestRoutes(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".keys", "openai"), []byte("  sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "MY_ANTHROPIC": "sk-ant-from-env", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	spec := &run.GatewaySpec{
		Prices: map[string]run.Price{"local-model": {Input: 1, Output: 2}},
		Routes: []run.RouteSpec{
			{Name: "anthropic", URL: "https://api.anthropic.com", Keys: []run.KeySource{
				{Env: "EMPTY", Header: "authorization"},
				{Env: "MY_ANTHROPIC", Header: "x-api-key", Extra: map[string]string{"x-extra": "1"}},
			}},
			{Name: "openai", URL: "https://api.openai.com", Keys: []run.KeySource{
				{Env: "UNSET", Header: "authorization"},
				{File: "~/.keys/openai", Header: "authorization"},
			}},
			{Name: "gemini", URL: "https://generativelanguage.googleapis.com", Keys: []run.KeySource{
				{File: "~/.keys/missing", Header: "x-goog-api-key"},
				{Command: "printf 'AIza-from-command\\n'", Header: "x-goog-api-key"},
			}},
			{Name: "local", URL: "http://127.0.0.1:1234", Server: "lmstudio", MaxConcurrent: 2},
		},
	}
	routes, err := Routes(context.Background(), spec, getenv)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Credential{
		"anthropic": {Header: "x-api-key", Value: "sk-ant-from-env", Source: "MY_ANTHROPIC", Extra: map[string]string{"x-extra": "1"}},
		"openai":    {Header: "authorization", Value: "sk-from-file", Source: "key file ~/.keys/openai"},
		"gemini":    {Header: "x-goog-api-key", Value: "AIza-from-command", Source: "key command"},
		"local":     {},
	} {
		got := routes[name].Credential
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: credential %+v, want %+v", name, got, want)
		}
	}
	if l := routes["local"]; l.Server != "lmstudio" || l.MaxConcurrent != 2 || !l.Prices.Free || l.Upstream.Host != "127.0.0.1:1234" {
		t.Errorf("local route %+v", l)
	}
	if a := routes["anthropic"]; a.Prices.Free || a.Prices.Overrides["local-model"].Output != 2 {
		t.Errorf("anthropic prices %+v", a.Prices)
	}
	if len(routes) != 4 {
		t.Errorf("%d routes", len(routes))
	}
}

func TestRoutesNoKey(t *testing.T) {
	home := t.TempDir()
	getenv := func(k string) string { return map[string]string{"HOME": home}[k] }
	spec := &run.GatewaySpec{Routes: []run.RouteSpec{{Name: "openai", URL: "https://user:pw@api.openai.com/?x=1", Keys: []run.KeySource{
		{Env: "OPENAI_API_KEY", Header: "authorization"},
		{File: "~/.openai-key", Header: "authorization"},
		{Command: "echo oops >&2; exit 3", Header: "authorization"},
		{Command: "true", Header: "authorization"}, // prints nothing
	}}}}
	_, err := Routes(context.Background(), spec, getenv)
	if err == nil {
		t.Fatal("a route without a key was accepted")
	}
	msg := err.Error()
	for _, want := range []string{"route openai", "OPENAI_API_KEY", "key file ~/.openai-key", "key command", "oops"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "pw") {
		t.Errorf("error %q shows the URL's password", msg)
	}
	if _, err := Routes(context.Background(), &run.GatewaySpec{Routes: []run.RouteSpec{{Name: "x", URL: "not a url"}}}, getenv); err == nil {
		t.Error("a bad upstream URL was accepted")
	}
}

func TestResolveKeyCommandContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	// sh forks sleep (it has more to do after it), and sleep keeps the
	// output pipe open: killing sh alone does not end the command.
	_, ok, err := ResolveKey(ctx, run.RouteSpec{Keys: []run.KeySource{{Command: "sleep 5; echo k", Header: "x-api-key"}}}, os.Getenv)
	if ok || err == nil || time.Since(t0) > 2500*time.Millisecond {
		t.Errorf("a hung key command: ok %v, err %v, after %s", ok, err, time.Since(t0))
	}
}

func TestModelServerURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:1234/v1":          "http://localhost:1234",
		"http://127.0.0.1:8000/v1/":         "http://127.0.0.1:8000",
		"http://localhost:11434":            "http://localhost:11434",
		"http://localhost:11434/":           "http://localhost:11434",
		"https://gpu.example.com/v1beta":    "https://gpu.example.com",
		" https://h.example/api/v1?x=1#top": "https://h.example/api",
	} {
		got, err := ModelServerURL(in)
		if err != nil || got != want {
			t.Errorf("ModelServerURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"http://user:hunter2@localhost:1234/v1", "ftp://localhost/v1", "unix:///tmp/x.sock", "localhost:1234", "", "http://"} {
		got, err := ModelServerURL(in)
		if err == nil {
			t.Errorf("ModelServerURL(%q) = %q, want an error", in, got)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows the password", err)
		}
	}
}

func TestAvailable(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "key"), []byte("k"), 0o600)
	getenv := func(k string) string { return map[string]string{"HOME": home, "SET": "v"}[k] }
	for _, c := range []struct {
		keys  []run.KeySource
		ok    bool
		tried []string
	}{
		{nil, true, nil},
		{[]run.KeySource{{Env: "UNSET"}, {Env: "SET"}}, true, nil},
		{[]run.KeySource{{Env: "UNSET"}, {File: "~/key"}}, true, nil},
		{[]run.KeySource{{Command: "exit 1"}}, true, nil},
		{[]run.KeySource{{Env: "UNSET"}, {File: "~/nokey"}}, false, []string{"UNSET", "key file ~/nokey"}},
	} {
		ok, tried := Available(run.RouteSpec{Keys: c.keys}, getenv)
		if ok != c.ok || !slices.Equal(tried, c.tried) {
			t.Errorf("Available(%+v) = %v %q, want %v %q", c.keys, ok, tried, c.ok, c.tried)
		}
	}
}

func TestPublicRoutes(t *testing.T) {
	for _, name := range RouteNames {
		spec, ok := Public(name)
		if !ok || spec.Name != name || len(spec.Keys) == 0 {
			t.Fatalf("Public(%s) = %+v", name, spec)
		}
		if u, err := url.Parse(spec.URL); err != nil || u.Scheme != "https" {
			t.Errorf("%s: URL %q", name, spec.URL)
		}
		if spec.Keys[0].Header != KeyHeader(name) {
			t.Errorf("%s: first key goes in %q, KeyHeader %q", name, spec.Keys[0].Header, KeyHeader(name))
		}
	}
	if _, ok := Public("mistral"); ok {
		t.Error("Public(mistral)")
	}
}
