package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// chatRequest is the part of an OpenAI chat completions request the server
// reads.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function *struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
		// Custom is a freeform tool (type "custom").
		Custom *struct {
			Name string `json:"name"`
		} `json:"custom"`
	} `json:"tools"`
	// Functions is the legacy form of tools.
	Functions []struct {
		Name       string         `json:"name"`
		Parameters map[string]any `json:"parameters"`
	} `json:"functions"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatText is the text of a message content: a string or an array of
// parts of which the "text" ones count.
func chatText(raw json.RawMessage) string { return contentText(raw, "text", "input_text", "") }

// chatTurn parses a chat completions request body into a Turn.
func chatTurn(body []byte, n int) (Turn, chatRequest, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Turn{}, req, err
	}
	t := Turn{Protocol: Chat, Model: req.Model, Stream: req.Stream, N: n, Body: body}
	for _, tl := range req.Tools {
		switch {
		case tl.Function != nil:
			t.Tools = append(t.Tools, Tool{Name: tl.Function.Name, Schema: tl.Function.Parameters})
		case tl.Custom != nil:
			t.Tools = append(t.Tools, Tool{Name: tl.Custom.Name, Freeform: true})
		}
	}
	for _, f := range req.Functions {
		t.Tools = append(t.Tools, Tool{Name: f.Name, Schema: f.Parameters})
	}
	var sys []string
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			if s := chatText(m.Content); s != "" {
				sys = append(sys, s)
			}
		case "tool", "function":
			t.ToolResults++
		case "user":
			t.LastUser = chatText(m.Content)
		}
	}
	t.System = strings.Join(sys, "\n")
	return t, req, nil
}

// chatUsage is the usage object of a chat completion.
func chatUsage(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.Input,
		"completion_tokens": u.Output,
		"total_tokens":      u.Input + u.Output,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": u.Cached,
			"audio_tokens":  0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens":           0,
			"audio_tokens":               0,
			"accepted_prediction_tokens": 0,
			"rejected_prediction_tokens": 0,
		},
	}
}

// chatArgs is the JSON text of a call's arguments (freeform input is sent
// as is).
func chatArgs(c Call) string {
	if c.Args == nil && c.Input != "" {
		return c.Input
	}
	if c.Args == nil {
		return "{}"
	}
	b, _ := json.Marshal(c.Args)
	return string(b)
}

const chatFingerprint = "fp_modelserver"

// serveChat answers one OpenAI chat completions request
// (POST /v1/chat/completions), streamed as server-sent
// "chat.completion.chunk" objects when the request asks for it.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, body []byte, n int, script Script) {
	turn, req, err := chatTurn(body, n)
	if err != nil {
		s.writeError(w, Chat, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	if req.Model == "" {
		s.writeError(w, Chat, http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	rep := script(turn)
	if s.scriptedError(w, Chat, rep) {
		return
	}
	c := &chatCompletion{id: s.nextID("chatcmpl-"), created: time.Now().Unix(), model: req.Model,
		rep: rep, usage: usageFor(rep, body), finish: "stop"}
	if len(rep.Calls) > 0 {
		c.finish = "tool_calls"
	}
	c.callIDs = make([]string, len(rep.Calls))
	for i := range rep.Calls {
		c.callIDs[i] = s.nextID("call_")
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, c.whole())
		return
	}
	c.stream(w, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

// chatCompletion is the answer to one chat completions request.
type chatCompletion struct {
	id      string
	created int64
	model   string
	rep     Reply
	usage   Usage
	finish  string   // the finish reason
	callIDs []string // one per rep.Calls
}

// whole is the answer as one "chat.completion" object.
func (c *chatCompletion) whole() map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if c.rep.Text != "" {
		msg["content"] = c.rep.Text
	}
	if len(c.rep.Calls) > 0 {
		var calls []any
		for i, call := range c.rep.Calls {
			calls = append(calls, map[string]any{"id": c.callIDs[i], "type": "function",
				"function": map[string]any{"name": call.Name, "arguments": chatArgs(call)}})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": c.finish}},
		"usage":   chatUsage(c.usage), "service_tier": "default", "system_fingerprint": chatFingerprint,
	}
}

// stream sends the answer as server-sent chunks: the role, the text in
// pieces, each call (its name, then its arguments in pieces), the finish
// reason, the usage when asked for, then [DONE].
func (c *chatCompletion) stream(w http.ResponseWriter, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, fin any) map[string]any {
		ch := map[string]any{
			"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
			"service_tier": "default", "system_fingerprint": chatFingerprint,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": fin}},
		}
		if includeUsage {
			ch["usage"] = nil
		}
		return ch
	}
	send(chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
	for _, piece := range chatSplit(c.rep.Text, 16) {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	for i, call := range c.rep.Calls {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.callIDs[i], "type": "function",
			"function": map[string]any{"name": call.Name, "arguments": ""}}}}, nil))
		for _, piece := range chatSplit(chatArgs(call), 24) {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	send(chunk(map[string]any{}, c.finish))
	if includeUsage {
		send(map[string]any{
			"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
			"service_tier": "default", "system_fingerprint": chatFingerprint,
			"choices": []any{}, "usage": chatUsage(c.usage),
		})
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if fl != nil {
		fl.Flush()
	}
}

// chatSplit cuts s into pieces of at most size bytes, on rune
// boundaries, as a model streams its output ("" gives none).
func chatSplit(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := size
		if n >= len(s) {
			out = append(out, s)
			break
		}
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = size
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
