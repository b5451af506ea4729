package modelserver

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const anthropicTestKey = "sk-ant-test-key"

// anthropicPost sends a Messages request as the SDK does.
func anthropicPost(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/anthropic/v1/messages?beta=true", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func anthropicJSON(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

type sseEvent struct {
	Name string
	Data map[string]any
}

// anthropicEvents reads an SSE stream, checking each event's name is its
// data's type.
func anthropicEvents(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var evs []sseEvent
	var name string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("bad data line %q: %v", line, err)
			}
			if d["type"] != name {
				t.Errorf("event %q carries type %v", name, d["type"])
			}
			evs = append(evs, sseEvent{name, d})
		case line == "":
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	return evs
}

const anthropicToolsBody = `{"model":"claude-test","max_tokens":1024,%s
 "system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Be brief."}],
 "tools":[{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},
  {"name":"Write","description":"write","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}},
  {"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},
  {"type":"web_search_20250305","name":"web_search","max_uses":5}],
 "messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>\nctx\n</system-reminder>"},{"type":"text","text":"Write hello.txt"}]}]}`

func anthropicBody(stream bool) string {
	s := `"stream":false,`
	if stream {
		s = `"stream":true,`
	}
	return strings.Replace(anthropicToolsBody, "%s", s, 1)
}

func TestAnthropicNonStreamText(t *testing.T) {
	srv := New(t, anthropicTestKey, "claude-test", Text("Hello there."))
	resp := anthropicPost(t, srv.URL, anthropicTestKey, `{"model":"claude-test","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.HasPrefix(resp.Header.Get("request-id"), "req_") {
		t.Errorf("request-id %q", resp.Header.Get("request-id"))
	}
	m := anthropicJSON(t, resp)
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "msg_") {
		t.Errorf("id %q", id)
	}
	if m["type"] != "message" || m["role"] != "assistant" || m["model"] != "claude-test" || m["stop_reason"] != "end_turn" {
		t.Errorf("message %v", m)
	}
	if v, ok := m["stop_sequence"]; !ok || v != nil {
		t.Errorf("stop_sequence %v (present %v)", v, ok)
	}
	content, _ := m["content"].([]any)
	if len(content) != 1 {
		t.Fatalf("content %v", content)
	}
	if b := content[0].(map[string]any); b["type"] != "text" || b["text"] != "Hello there." {
		t.Errorf("block %v", b)
	}
	u, _ := m["usage"].(map[string]any)
	for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
		if _, ok := u[k].(float64); !ok {
			t.Errorf("usage lacks %s: %v", k, u)
		}
	}
	if u["input_tokens"].(float64) <= 0 || u["output_tokens"].(float64) <= 0 {
		t.Errorf("usage %v", u)
	}
}

func TestAnthropicNonStreamToolCall(t *testing.T) {
	srv := New(t, anthropicTestKey, "claude-test", WriteFileIn("/work", "hello.txt", "hi\n"))
	m := anthropicJSON(t, anthropicPost(t, srv.URL, anthropicTestKey, anthropicBody(false)))
	if m["stop_reason"] != "tool_use" {
		t.Errorf("stop_reason %v", m["stop_reason"])
	}
	content, _ := m["content"].([]any)
	if len(content) != 2 {
		t.Fatalf("content %v", content)
	}
	if b := content[0].(map[string]any); b["type"] != "text" || b["text"] != "I will write hello.txt." {
		t.Errorf("text block %v", b)
	}
	b := content[1].(map[string]any)
	if id, _ := b["id"].(string); b["type"] != "tool_use" || !strings.HasPrefix(id, "toolu_") || b["name"] != "Write" {
		t.Errorf("tool block %v", b)
	}
	in, _ := b["input"].(map[string]any)
	if in["file_path"] != "/work/hello.txt" || in["content"] != "hi\n" {
		t.Errorf("input %v", in)
	}
}

func TestAnthropicStream(t *testing.T) {
	srv := New(t, anthropicTestKey, "claude-test", func(Turn) Reply {
		return Reply{Text: "Writing two files now, one after the other.", Calls: []Call{
			{Name: "Write", Args: map[string]any{"file_path": "/w/a.txt", "content": strings.Repeat("a", 100)}},
			{Name: "Bash", Args: map[string]any{"command": "ls"}},
		}, Usage: &Usage{Input: 100, Output: 7, Cached: 40}}
	})
	resp := anthropicPost(t, srv.URL, anthropicTestKey, anthropicBody(true))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := anthropicEvents(t, resp.Body)
	var names []string
	for _, e := range evs {
		if len(names) == 0 || names[len(names)-1] != e.Name || e.Name != "content_block_delta" {
			names = append(names, e.Name)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop " +
		"message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}

	msg := evs[0].Data["message"].(map[string]any)
	if id, _ := msg["id"].(string); !strings.HasPrefix(id, "msg_") || msg["type"] != "message" || msg["role"] != "assistant" ||
		msg["model"] != "claude-test" || msg["stop_reason"] != nil || len(msg["content"].([]any)) != 0 {
		t.Errorf("message_start %v", msg)
	}
	su := msg["usage"].(map[string]any)
	if su["input_tokens"] != 60.0 || su["cache_read_input_tokens"] != 40.0 || su["cache_creation_input_tokens"] != 0.0 || su["output_tokens"] != 1.0 {
		t.Errorf("message_start usage %v", su)
	}

	// Reassemble the blocks as the SDK does.
	type block struct {
		typ, id, name, text, json string
		stopped                   bool
	}
	var blocks []*block
	var final map[string]any
	for _, e := range evs {
		idx := -1
		if f, ok := e.Data["index"].(float64); ok {
			idx = int(f)
		}
		switch e.Name {
		case "content_block_start":
			if idx != len(blocks) {
				t.Fatalf("block index %d, want %d", idx, len(blocks))
			}
			cb := e.Data["content_block"].(map[string]any)
			b := &block{typ: cb["type"].(string)}
			if b.typ == "tool_use" {
				b.id, b.name = cb["id"].(string), cb["name"].(string)
				if in, ok := cb["input"].(map[string]any); !ok || len(in) != 0 {
					t.Errorf("tool_use start input %v", cb["input"])
				}
			} else if cb["text"] != "" {
				t.Errorf("text start %v", cb)
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			b := blocks[idx]
			d := e.Data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				b.text += d["text"].(string)
			case "input_json_delta":
				b.json += d["partial_json"].(string)
			default:
				t.Errorf("delta %v", d)
			}
			if (b.typ == "text") != (d["type"] == "text_delta") {
				t.Errorf("delta %v in a %s block", d, b.typ)
			}
		case "content_block_stop":
			blocks[idx].stopped = true
		case "message_delta":
			final = e.Data
		}
	}
	if len(blocks) != 3 || blocks[0].text != "Writing two files now, one after the other." {
		t.Fatalf("blocks %+v", blocks)
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(blocks[1].json), &a); err != nil || a["file_path"] != "/w/a.txt" || blocks[1].name != "Write" {
		t.Errorf("Write call %+v: %v", blocks[1], err)
	}
	if blocks[2].json != `{"command":"ls"}` || blocks[2].name != "Bash" || blocks[2].id == blocks[1].id || !strings.HasPrefix(blocks[2].id, "toolu_") {
		t.Errorf("Bash call %+v", blocks[2])
	}
	for i, b := range blocks {
		if !b.stopped {
			t.Errorf("block %d not stopped", i)
		}
	}
	d := final["delta"].(map[string]any)
	if d["stop_reason"] != "tool_use" || d["stop_sequence"] != nil {
		t.Errorf("message_delta %v", final)
	}
	fu := final["usage"].(map[string]any)
	if fu["output_tokens"] != 7.0 || fu["input_tokens"] != 60.0 || fu["cache_read_input_tokens"] != 40.0 {
		t.Errorf("message_delta usage %v", fu)
	}
}

func TestAnthropicStreamTextOnlyFlushes(t *testing.T) {
	srv := New(t, anthropicTestKey, "claude-test", Text("ok"))
	rec := httptest.NewRecorder()
	body := []byte(`{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	srv.serveAnthropic(rec, r, body, 0, Text("ok"))
	if !rec.Flushed {
		t.Error("stream not flushed")
	}
	evs := anthropicEvents(t, rec.Body)
	if len(evs) != 7 || evs[5].Data["delta"].(map[string]any)["stop_reason"] != "end_turn" {
		t.Errorf("events %v", evs)
	}
}

func TestAnthropicTurn(t *testing.T) {
	var mu sync.Mutex
	var turns []Turn
	srv := New(t, anthropicTestKey, "claude-test", func(tn Turn) Reply {
		mu.Lock()
		turns = append(turns, tn)
		mu.Unlock()
		return Reply{Text: "ok"}
	})
	anthropicPost(t, srv.URL, anthropicTestKey, anthropicBody(true)).Body.Close()
	second := `{"model":"claude-test","max_tokens":5,"system":"sys","messages":[
	 {"role":"user","content":"Write hello.txt"},
	 {"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"Write","input":{}},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"done"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"x"}]}]}]}`
	anthropicPost(t, srv.URL, anthropicTestKey, second).Body.Close()
	if len(turns) != 2 {
		t.Fatalf("%d turns", len(turns))
	}
	a, b := turns[0], turns[1]
	if a.Protocol != Anthropic || a.Model != "claude-test" || !a.Stream || a.N != 0 || a.ToolResults != 0 ||
		a.System != "You are Claude Code.\nBe brief." || a.LastUser != "Write hello.txt" || len(a.Body) == 0 {
		t.Errorf("first turn %+v", a)
	}
	if len(a.Tools) != 4 || a.Tools[1].Name != "Write" || a.Tools[1].Schema["properties"] == nil || a.Tools[0].Freeform {
		t.Errorf("tools %+v", a.Tools)
	}
	if c, ok := WriteCall(a.Tools[2:3], "/w", "x.txt", "x"); !ok || c.Args["command"] != "create" || c.Args["path"] != "/w/x.txt" {
		t.Errorf("text editor tool: %+v %v", c, ok)
	}
	if a.Tools[3].Schema != nil {
		t.Errorf("server tool schema %v", a.Tools[3].Schema)
	}
	if b.Stream || b.N != 1 || b.ToolResults != 2 || b.System != "sys" || b.LastUser != "Write hello.txt" {
		t.Errorf("second turn %+v", b)
	}
}

func TestAnthropicErrors(t *testing.T) {
	srv := New(t, anthropicTestKey, "claude-test", Fail(429, "slow down"))
	check := func(resp *http.Response, status int, typ, msg string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Errorf("status %d, want %d", resp.StatusCode, status)
		}
		m := anthropicJSON(t, resp)
		e, _ := m["error"].(map[string]any)
		if m["type"] != "error" || e["type"] != typ || (msg != "" && e["message"] != msg) {
			t.Errorf("error body %v", m)
		}
	}
	body := `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	check(anthropicPost(t, srv.URL, anthropicTestKey, body), 429, "rate_limit_error", "slow down")
	check(anthropicPost(t, srv.URL, "sk-wrong", body), 401, "authentication_error", "")
	check(anthropicPost(t, srv.URL, anthropicTestKey, `{"model":`), 400, "invalid_request_error", "")
	srv.SetScript(Fail(500, ""))
	check(anthropicPost(t, srv.URL, anthropicTestKey, body), 500, "api_error", "Internal Server Error")
	if got := len(srv.ModelRequests(Anthropic)); got != 4 {
		t.Errorf("%d recorded model requests", got)
	}
}
