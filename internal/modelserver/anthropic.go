package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Anthropic Messages API (POST /v1/messages), as api.anthropic.com
// speaks it and as the official SDKs parse it.
//
// Usage mapping: Usage.Input is the whole prompt and Usage.Cached the part
// of it read from the prompt cache, so input_tokens = Input - Cached and
// cache_read_input_tokens = Cached (the API counts cached tokens apart);
// cache_creation_input_tokens is always 0.

// anthropicRequest is the part of a Messages request the server reads.
type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	System   json.RawMessage    `json:"system"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []anthropicTool    `json:"tools"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of blocks
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicTool struct {
	Type        string         `json:"type"` // "" or "custom" for client tools; versioned for Anthropic-defined ones
	Name        string         `json:"name"`
	InputSchema map[string]any `json:"input_schema"`
}

// anthropicBuiltinSchemas are the input schemas of the Anthropic-defined
// client tools, which a request names by type only (the model knows them).
var anthropicBuiltinSchemas = map[string]map[string]any{
	"text_editor": {"type": "object", "properties": map[string]any{
		"command": map[string]any{"type": "string", "enum": []any{"view", "create", "str_replace", "insert", "undo_edit"}},
		"path":    map[string]any{"type": "string"}, "file_text": map[string]any{"type": "string"},
		"old_str": map[string]any{"type": "string"}, "new_str": map[string]any{"type": "string"},
		"insert_line": map[string]any{"type": "integer"}, "view_range": map[string]any{"type": "array"},
	}, "required": []any{"command", "path"}},
	"bash": {"type": "object", "properties": map[string]any{
		"command": map[string]any{"type": "string"}, "restart": map[string]any{"type": "boolean"},
	}},
}

// blocks returns the content blocks of m (a string content is one text
// block).
func (m anthropicMessage) blocks() []anthropicBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

// anthropicSystem is the text of a system prompt (a string or text blocks).
func anthropicSystem(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// anthropicTurn parses a Messages request body into a Turn.
func anthropicTurn(req anthropicRequest, body []byte, n int) Turn {
	t := Turn{Protocol: Anthropic, Model: req.Model, Stream: req.Stream, System: anthropicSystem(req.System), N: n, Body: body}
	for _, tl := range req.Tools {
		schema := tl.InputSchema
		if schema == nil && tl.Type != "" && tl.Type != "custom" {
			for prefix, s := range anthropicBuiltinSchemas {
				if strings.HasPrefix(tl.Type, prefix+"_") {
					schema = s
				}
			}
		}
		t.Tools = append(t.Tools, Tool{Name: tl.Name, Schema: schema})
	}
	for _, m := range req.Messages {
		// Claude Code puts <system-reminder> text blocks before the
		// user's own text; LastUser skips them when there is other text.
		var texts, reminders []string
		for _, b := range m.blocks() {
			switch {
			case b.Type == "tool_result":
				t.ToolResults++
			case b.Type == "text" && strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>"):
				reminders = append(reminders, b.Text)
			case b.Type == "text" && b.Text != "":
				texts = append(texts, b.Text)
			}
		}
		if len(texts) == 0 {
			texts = reminders
		}
		if m.Role == "user" && len(texts) > 0 {
			t.LastUser = strings.Join(texts, "\n")
		}
	}
	return t
}

// anthropicUsage is the usage object of a message.
func anthropicUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":                max(u.Input-u.Cached, 0),
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     u.Cached,
		"cache_creation":              map[string]any{"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
		"output_tokens":               u.Output,
		"service_tier":                "standard",
	}
}

// anthropicContent is the content blocks of a reply, tool inputs decoded.
func (s *Server) anthropicContent(rep Reply) []map[string]any {
	var content []map[string]any
	if rep.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	for _, c := range rep.Calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": s.nextID("toolu_01modelserver"), "name": c.Name, "input": args})
	}
	return content
}

// serveAnthropic answers one Messages request.
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, body []byte, n int, script Script) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, Anthropic, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	if req.Model == "" {
		s.writeError(w, Anthropic, http.StatusBadRequest, "model: Field required")
		return
	}
	if len(req.Messages) == 0 {
		s.writeError(w, Anthropic, http.StatusBadRequest, "messages: at least one message is required")
		return
	}
	rep := script(anthropicTurn(req, body, n))
	if s.scriptedError(w, Anthropic, rep) {
		return
	}
	usage := usageFor(rep, body)
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	id := s.nextID("msg_01modelserver")
	w.Header().Set("request-id", s.nextID("req_01modelserver"))
	content := s.anthropicContent(rep)
	if !req.Stream {
		if content == nil {
			content = []map[string]any{}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(usage),
		})
		return
	}

	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	event := func(name string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if fl != nil {
			fl.Flush()
		}
	}
	// message_start carries the input usage and an output count of 1, as
	// the API sends it; message_delta carries the final (cumulative) usage.
	start := anthropicUsage(Usage{Input: usage.Input, Cached: usage.Cached, Output: 1})
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": start}})
	for i, b := range content {
		var deltas []map[string]any
		switch b["type"] {
		case "text":
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range anthropicChunks(rep.Text, 24) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
			}
		case "tool_use":
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			js, _ := json.Marshal(b["input"])
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": ""})
			for _, piece := range anthropicChunks(string(js), 32) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		if i == 0 {
			event("ping", map[string]any{"type": "ping"})
		}
		for _, d := range deltas {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if len(content) == 0 {
		event("ping", map[string]any{"type": "ping"})
	}
	final := anthropicUsage(usage)
	delete(final, "cache_creation")
	delete(final, "service_tier")
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": final})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicChunks splits s into pieces of at most n bytes, not splitting a UTF-8
// sequence.
func anthropicChunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		i := n
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		if i == 0 {
			i = n
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
