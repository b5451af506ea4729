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
	if rep.Status != 0 {
		msg := rep.ErrorMessage
		if msg == "" {
			msg = http.StatusText(rep.Status)
		}
		s.writeError(w, Chat, rep.Status, msg)
		return
	}
	id := s.nextID("chatcmpl-")
	created := time.Now().Unix()
	usage := usageFor(rep, body)
	finish := "stop"
	if len(rep.Calls) > 0 {
		finish = "tool_calls"
	}
	callIDs := make([]string, len(rep.Calls))
	for i := range rep.Calls {
		callIDs[i] = s.nextID("call_")
	}

	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
		if rep.Text != "" {
			msg["content"] = rep.Text
		}
		if len(rep.Calls) > 0 {
			var calls []any
			for i, c := range rep.Calls {
				calls = append(calls, map[string]any{"id": callIDs[i], "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": chatArgs(c)}})
			}
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":   chatUsage(usage), "service_tier": "default", "system_fingerprint": chatFingerprint,
		})
		return
	}

	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
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
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"service_tier": "default", "system_fingerprint": chatFingerprint,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": fin}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		return c
	}
	send(chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
	for _, piece := range chatSplit(rep.Text, 16) {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	for i, c := range rep.Calls {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callIDs[i], "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		for _, piece := range chatSplit(chatArgs(c), 24) {
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	send(chunk(map[string]any{}, finish))
	if includeUsage {
		send(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"service_tier": "default", "system_fingerprint": chatFingerprint,
			"choices": []any{}, "usage": chatUsage(usage),
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
