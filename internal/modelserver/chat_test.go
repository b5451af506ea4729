package modelserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func chatPost(t *testing.T, srv *Server, key string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/openai/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var chatWriteTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "write_file", "description": "write a file",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{
		"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}},
}}

// chatSSE reads a chat completions stream: the JSON chunks and whether
// it ended with [DONE].
func chatSSE(t *testing.T, r io.Reader) ([]map[string]any, bool) {
	t.Helper()
	var chunks []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		if data == "[DONE]" {
			return chunks, true
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		chunks = append(chunks, c)
	}
	return chunks, false
}

func TestChatNonStreamText(t *testing.T) {
	var got Turn
	srv := New(t, "k1", "m1", func(turn Turn) Reply {
		got = turn
		return Reply{Text: "hi there", Usage: &Usage{Input: 10, Output: 3, Cached: 4}}
	})
	resp := chatPost(t, srv, "k1", map[string]any{"model": "m1", "messages": []any{
		map[string]any{"role": "system", "content": "be brief"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hello"}}},
	}})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out struct {
		ID, Object, Model string
		Created           int64
		Choices           []struct {
			Index        int
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Role      string
				Content   *string
				ToolCalls []any `json:"tool_calls"`
			}
		}
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			TotalTokens         int64 `json:"total_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.ID, "chatcmpl-") || out.Object != "chat.completion" || out.Model != "m1" || out.Created == 0 {
		t.Fatalf("%+v", out)
	}
	if len(out.Choices) != 1 || out.Choices[0].FinishReason != "stop" || out.Choices[0].Message.Role != "assistant" ||
		out.Choices[0].Message.Content == nil || *out.Choices[0].Message.Content != "hi there" || out.Choices[0].Message.ToolCalls != nil {
		t.Fatalf("choices %+v", out.Choices)
	}
	if u := out.Usage; u.PromptTokens != 10 || u.CompletionTokens != 3 || u.TotalTokens != 13 || u.PromptTokensDetails.CachedTokens != 4 {
		t.Fatalf("usage %+v", u)
	}
	if got.Protocol != Chat || got.Model != "m1" || got.Stream || got.System != "be brief" || got.LastUser != "hello" || got.N != 0 {
		t.Fatalf("turn %+v", got)
	}
}

func TestChatNonStreamToolCalls(t *testing.T) {
	srv := New(t, "k1", "m1", WriteFileIn("/w", "hello.txt", "hi\n"))
	resp := chatPost(t, srv, "k1", map[string]any{"model": "m1", "tools": []any{chatWriteTool},
		"messages": []any{map[string]any{"role": "user", "content": "Write hello.txt"}}})
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   string
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	c := out.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("%+v", c)
	}
	tc := c.Message.ToolCalls[0]
	var args map[string]string
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" || tc.Function.Name != "write_file" ||
		args["file_path"] != "/w/hello.txt" || args["content"] != "hi\n" {
		t.Fatalf("%+v %v", tc, args)
	}

	// With the tool result in the conversation the script answers text.
	resp = chatPost(t, srv, "k1", map[string]any{"model": "m1", "tools": []any{chatWriteTool}, "messages": []any{
		map[string]any{"role": "user", "content": "Write hello.txt"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": tc.ID, "type": "function",
			"function": map[string]any{"name": "write_file", "arguments": tc.Function.Arguments}}}},
		map[string]any{"role": "tool", "tool_call_id": tc.ID, "content": "ok"},
	}})
	out.Choices = nil
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Choices[0].FinishReason != "stop" || out.Choices[0].Message.Content != "Done: hello.txt is written." {
		t.Fatalf("%+v", out.Choices)
	}
}

func TestChatStream(t *testing.T) {
	srv := New(t, "k1", "m1", func(Turn) Reply {
		return Reply{Text: "Writing two files now, é ü.", Calls: []Call{
			{Name: "write_file", Args: map[string]any{"file_path": "/a", "content": strings.Repeat("x", 60)}},
			{Name: "write_file", Args: map[string]any{"file_path": "/b", "content": "y"}},
		}, Usage: &Usage{Input: 7, Output: 5, Cached: 2}}
	})
	resp := chatPost(t, srv, "k1", map[string]any{"model": "m1", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"tools": []any{chatWriteTool}, "messages": []any{map[string]any{"role": "user", "content": "go"}}})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks, done := chatSSE(t, resp.Body)
	if !done || len(chunks) < 4 {
		t.Fatalf("done=%v chunks=%v", done, chunks)
	}
	id := chunks[0]["id"]
	var text strings.Builder
	type call struct{ id, name, args string }
	var calls []call
	var finish any
	for i, c := range chunks {
		if c["id"] != id || c["object"] != "chat.completion.chunk" || c["model"] != "m1" {
			t.Fatalf("chunk %d: %v", i, c)
		}
		choices := c["choices"].([]any)
		if i == len(chunks)-1 {
			// The usage chunk: no choices.
			u, _ := c["usage"].(map[string]any)
			if len(choices) != 0 || u == nil || u["prompt_tokens"] != 7.0 || u["completion_tokens"] != 5.0 || u["total_tokens"] != 12.0 ||
				u["prompt_tokens_details"].(map[string]any)["cached_tokens"] != 2.0 {
				t.Fatalf("usage chunk %v", c)
			}
			continue
		}
		if v, ok := c["usage"]; !ok || v != nil {
			t.Fatalf("chunk %d usage %v", i, c["usage"])
		}
		ch := choices[0].(map[string]any)
		delta := ch["delta"].(map[string]any)
		if i == 0 && (delta["role"] != "assistant" || delta["content"] != "") {
			t.Fatalf("first chunk %v", c)
		}
		if s, ok := delta["content"].(string); ok {
			text.WriteString(s)
		}
		for _, tcv := range chatSlice(delta["tool_calls"]) {
			tc := tcv.(map[string]any)
			idx := int(tc["index"].(float64))
			fn := tc["function"].(map[string]any)
			if idx == len(calls) {
				if tc["type"] != "function" || tc["id"] == nil || fn["name"] == nil {
					t.Fatalf("first tool call delta %v", tc)
				}
				calls = append(calls, call{id: tc["id"].(string), name: fn["name"].(string)})
			} else if tc["id"] != nil || fn["name"] != nil {
				t.Fatalf("later tool call delta repeats id/name %v", tc)
			}
			a, _ := fn["arguments"].(string)
			calls[idx].args += a
		}
		if ch["finish_reason"] != nil {
			finish = ch["finish_reason"]
			if i != len(chunks)-2 {
				t.Fatalf("finish_reason before the end: chunk %d", i)
			}
		}
	}
	if text.String() != "Writing two files now, é ü." || finish != "tool_calls" || len(calls) != 2 {
		t.Fatalf("text %q finish %v calls %v", text.String(), finish, calls)
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(calls[0].args), &a); err != nil || a["content"] != strings.Repeat("x", 60) || calls[1].name != "write_file" {
		t.Fatalf("calls %v %v", calls, err)
	}
	if calls[0].id == calls[1].id {
		t.Fatal("duplicate call ids")
	}
}

func TestChatStreamNoUsage(t *testing.T) {
	srv := New(t, "k1", "m1", Text("ok"))
	resp := chatPost(t, srv, "k1", map[string]any{"model": "m1", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	chunks, done := chatSSE(t, resp.Body)
	if !done {
		t.Fatal("no [DONE]")
	}
	last := chunks[len(chunks)-1]
	if _, ok := last["usage"]; ok {
		t.Fatalf("usage without include_usage: %v", last)
	}
	ch := last["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "stop" {
		t.Fatalf("%v", last)
	}
}

func TestChatErrors(t *testing.T) {
	srv := New(t, "k1", "m1", Fail(429, "slow down"))
	resp := chatPost(t, srv, "wrong", map[string]any{"model": "m1", "messages": []any{}})
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if resp.StatusCode != 401 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Code != "invalid_api_key" {
		t.Fatalf("%+v %v", e, err)
	}
	resp = chatPost(t, srv, "k1", map[string]any{"model": "m1", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if resp.StatusCode != 429 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Message != "slow down" {
		t.Fatalf("%+v %v", e, err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader("{not json"))
	req.Header.Set("Authorization", "Bearer k1")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 400 {
		t.Fatalf("bad json: status %d", r2.StatusCode)
	}
	if n := len(srv.ModelRequests(Chat)); n != 3 {
		t.Fatalf("recorded %d chat requests", n)
	}
}

func TestChatTurnParsing(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[
		{"role":"developer","content":[{"type":"text","text":"sys A"}]},
		{"role":"user","content":"first"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"r1"},
		{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"r2"}]},
		{"role":"user","content":[{"type":"text","text":"second"},{"type":"image_url","image_url":{"url":"data:x"}}]}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"custom","custom":{"name":"apply_patch"}}]}`)
	turn, _, err := chatTurn(body, 3)
	if err != nil {
		t.Fatal(err)
	}
	if turn.ToolResults != 2 || turn.System != "sys A" || turn.LastUser != "second" || !turn.Stream || turn.N != 3 ||
		len(turn.Tools) != 2 || turn.Tools[0].Name != "f" || turn.Tools[0].Schema["type"] != "object" || !turn.Tools[1].Freeform {
		t.Fatalf("%+v", turn)
	}
}

func chatSlice(v any) []any { s, _ := v.([]any); return s }
