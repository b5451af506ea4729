package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"
)

// The OpenAI Responses API (POST /v1/responses), as codex and the OpenAI
// SDKs speak it. The request's "input" is a list of items (messages,
// function_call / function_call_output, custom_tool_call /
// custom_tool_call_output, reasoning ...) or a plain string; its "tools"
// are "function" tools (JSON schema in "parameters") and "custom" tools
// (free text input, optionally constrained by a grammar), plus hosted
// tools (web_search ...). The answer is one Response object, or with
// "stream": true the SSE sequence
//
//	response.created, response.in_progress,
//	per output item: response.output_item.added,
//	  message: response.content_part.added, response.output_text.delta...,
//	    response.output_text.done, response.content_part.done
//	  function_call: response.function_call_arguments.delta...,
//	    response.function_call_arguments.done
//	  custom_tool_call: response.custom_tool_call_input.delta...,
//	    response.custom_tool_call_input.done
//	response.output_item.done,
//	response.completed (with the usage)
//
// every event as "event: <type>\ndata: <json with the same type and a
// sequence_number>\n\n".

// responsesRequest is the part of a Responses request the server reads.
type responsesRequest struct {
	Model              string          `json:"model"`
	Stream             bool            `json:"stream"`
	Instructions       json.RawMessage `json:"instructions"`
	Input              json.RawMessage `json:"input"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Store              *bool           `json:"store"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Text               json.RawMessage `json:"text"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Metadata           json.RawMessage `json:"metadata"`
	PromptCacheKey     json.RawMessage `json:"prompt_cache_key"`
	ServiceTier        json.RawMessage `json:"service_tier"`
	Temperature        json.RawMessage `json:"temperature"`
	TopP               json.RawMessage `json:"top_p"`
	Truncation         json.RawMessage `json:"truncation"`
	User               json.RawMessage `json:"user"`
}

// responsesTool is one entry of "tools". Function tools carry their JSON
// schema in Parameters; custom tools carry a Format (text or grammar);
// "namespace" tools group further tools.
type responsesTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters map[string]any  `json:"parameters"`
	Format     json.RawMessage `json:"format"`
	Tools      []responsesTool `json:"tools"`
}

// responsesItem is one entry of "input".
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Tools   []responsesTool `json:"tools"` // additional_tools
}

// parseResponsesRequest turns a Responses request body into a Turn (N and
// Protocol are set by the caller).
func parseResponsesRequest(body []byte) (responsesRequest, Turn, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, Turn{}, err
	}
	t := Turn{Protocol: Responses, Model: req.Model, Stream: req.Stream, Body: body}
	var system []string
	if s := respJSONString(req.Instructions); s != "" {
		system = append(system, s)
	}
	var items []responsesItem
	if s := respJSONString(req.Input); s != "" {
		t.LastUser = s
	} else if len(req.Input) > 0 {
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return req, Turn{}, fmt.Errorf("input: %w", err)
		}
	}
	tools := req.Tools
	for _, it := range items {
		switch it.Type {
		case "additional_tools":
			// Responses "lite" (codex with its own models): the tools
			// travel in the input, as a developer item.
			tools = append(tools, it.Tools...)
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output",
			"computer_call_output", "mcp_call_output", "tool_search_output":
			t.ToolResults++
		case "message", "":
			text := responsesContentText(it.Content)
			switch it.Role {
			case "system", "developer":
				if text != "" {
					system = append(system, text)
				}
			case "user":
				t.LastUser = text
			}
		}
	}
	t.System = strings.Join(system, "\n\n")
	t.Tools = responsesTools(tools, "")
	req.Tools = tools
	return req, t, nil
}

// responsesTools flattens the offered tools: a namespace's members are
// named "<namespace>__<name>", as codex names them, except in the default
// namespace "functions", whose members keep their names.
func responsesTools(in []responsesTool, prefix string) []Tool {
	var out []Tool
	for _, rt := range in {
		switch rt.Type {
		case "function":
			out = append(out, Tool{Name: prefix + rt.Name, Schema: rt.Parameters})
		case "custom":
			out = append(out, Tool{Name: prefix + rt.Name, Freeform: true})
		case "namespace":
			p := prefix + rt.Name + "__"
			if rt.Name == "functions" {
				p = prefix
			}
			out = append(out, responsesTools(rt.Tools, p)...)
		case "local_shell":
			out = append(out, Tool{Name: "local_shell"})
		default:
			// hosted tools (web_search, image_generation, file_search ...)
			// are named by their type.
			name := rt.Name
			if name == "" {
				name = rt.Type
			}
			out = append(out, Tool{Name: prefix + name})
		}
	}
	return out
}

// responsesContentText is the text of a message's content: a string or a
// list of input_text / output_text parts.
func responsesContentText(raw json.RawMessage) string { return contentText(raw) }

// respJSONString is raw as a string when it is a JSON string, else "".
func respJSONString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// serveResponses answers one Responses request.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, body []byte, n int, script Script) {
	req, turn, err := parseResponsesRequest(body)
	if err != nil {
		s.writeError(w, Responses, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if req.Model == "" {
		s.writeError(w, Responses, http.StatusBadRequest, "Missing required parameter: 'model'.")
		return
	}
	turn.N = n
	rep := script(turn)
	if s.scriptedError(w, Responses, rep) {
		return
	}
	resp := s.newResponsesResponse(req, body)
	output := s.responsesOutput(rep, turn.Tools)
	u := usageFor(rep, body)
	w.Header().Set("x-request-id", s.nextID("req_"))
	w.Header().Set("openai-processing-ms", "1")
	if !req.Stream {
		resp["status"] = "completed"
		resp["output"] = output
		resp["usage"] = responsesUsage(u)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	s.streamResponses(w, resp, output, u)
}

// newResponsesResponse is the Response object (status in_progress, no
// output) echoing the request's settings, as the real API does.
func (s *Server) newResponsesResponse(req responsesRequest, body []byte) map[string]any {
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw)
	echo := func(key string, def any) any {
		if v, ok := raw[key]; ok && len(v) > 0 {
			return v
		}
		return def
	}
	parallel := true
	if req.ParallelToolCalls != nil {
		parallel = *req.ParallelToolCalls
	}
	store := true
	if req.Store != nil {
		store = *req.Store
	}
	return map[string]any{
		"id":                   s.nextID("resp_"),
		"object":               "response",
		"created_at":           time.Now().Unix(),
		"status":               "in_progress",
		"background":           false,
		"error":                nil,
		"incomplete_details":   nil,
		"instructions":         echo("instructions", nil),
		"max_output_tokens":    echo("max_output_tokens", nil),
		"model":                req.Model,
		"output":               []any{},
		"parallel_tool_calls":  parallel,
		"previous_response_id": echo("previous_response_id", nil),
		"prompt_cache_key":     echo("prompt_cache_key", nil),
		"reasoning":            echo("reasoning", map[string]any{"effort": nil, "summary": nil}),
		"service_tier":         echo("service_tier", "default"),
		"store":                store,
		"temperature":          echo("temperature", 1.0),
		"text":                 echo("text", map[string]any{"format": map[string]any{"type": "text"}}),
		"tool_choice":          echo("tool_choice", "auto"),
		"tools":                echo("tools", []any{}),
		"top_p":                echo("top_p", 1.0),
		"truncation":           echo("truncation", "disabled"),
		"usage":                nil,
		"user":                 echo("user", nil),
		"metadata":             echo("metadata", map[string]any{}),
	}
}

// responsesOutput is the reply as completed output items: one assistant
// message with the text (when any), then one item per call.
func (s *Server) responsesOutput(rep Reply, tools []Tool) []map[string]any {
	var out []map[string]any
	if rep.Text != "" {
		out = append(out, map[string]any{
			"id": s.nextID("msg_"), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{respOutputText(rep.Text)},
		})
	}
	for _, c := range rep.Calls {
		if respFreeform(c, tools) {
			out = append(out, map[string]any{
				"id": s.nextID("ctc_"), "type": "custom_tool_call", "status": "completed",
				"call_id": s.nextID("call_"), "name": c.Name, "input": c.Input,
			})
			continue
		}
		args := "{}"
		if c.Args != nil {
			b, _ := json.Marshal(c.Args)
			args = string(b)
		}
		out = append(out, map[string]any{
			"id": s.nextID("fc_"), "type": "function_call", "status": "completed",
			"call_id": s.nextID("call_"), "name": c.Name, "arguments": args,
		})
	}
	return out
}

// respFreeform reports whether c calls a custom (free text) tool: the
// offered tool is Freeform, or, when the tool is not offered, the call
// has Input and no Args.
func respFreeform(c Call, tools []Tool) bool {
	for _, t := range tools {
		if t.Name == c.Name {
			return t.Freeform
		}
	}
	return c.Args == nil && c.Input != ""
}

func respOutputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": text}
}

func responsesUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":          u.Input,
		"input_tokens_details":  map[string]any{"cached_tokens": u.Cached},
		"output_tokens":         u.Output,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.Input + u.Output,
	}
}

// streamResponses writes the SSE event sequence of resp with output,
// flushing each event.
func (s *Server) streamResponses(w http.ResponseWriter, resp map[string]any, output []map[string]any, u Usage) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"] = typ
		ev["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	snapshot := func() map[string]any {
		c := make(map[string]any, len(resp))
		for k, v := range resp {
			c[k] = v
		}
		return c
	}
	send("response.created", map[string]any{"response": snapshot()})
	send("response.in_progress", map[string]any{"response": snapshot()})
	for i, item := range output {
		id := item["id"].(string)
		switch item["type"] {
		case "message":
			text := item["content"].([]any)[0].(map[string]any)["text"].(string)
			send("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
			send("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": respOutputText("")})
			for _, d := range respChunks(text, 16) {
				send("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
					"delta": d, "logprobs": []any{}})
			}
			send("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"text": text, "logprobs": []any{}})
			send("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": respOutputText(text)})
		case "function_call":
			args := item["arguments"].(string)
			send("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": id, "type": "function_call", "status": "in_progress", "arguments": "",
				"call_id": item["call_id"], "name": item["name"]}})
			for _, d := range respChunks(args, 32) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": d})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i,
				"name": item["name"], "arguments": args})
		case "custom_tool_call":
			input := item["input"].(string)
			send("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": id, "type": "custom_tool_call", "status": "in_progress", "input": "",
				"call_id": item["call_id"], "name": item["name"]}})
			for _, d := range respChunks(input, 32) {
				send("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": d})
			}
			send("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": input})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	done := snapshot()
	done["status"] = "completed"
	done["output"] = output
	done["usage"] = responsesUsage(u)
	send("response.completed", map[string]any{"response": done})
}

// respChunks splits s into pieces of about n bytes, on rune boundaries (one
// empty piece for an empty s).
func respChunks(s string, n int) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && !respRuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func respRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ShellWriteFile is WriteFile for agents without a write-file tool, such as
// codex: while the conversation holds no tool result, it writes content to
// name with the first tool that can, best first: a write-like tool
// (WriteCall), an apply_patch tool (PatchCall), a shell tool (ShellCall
// with a printf command). Every other turn answers with text.
func ShellWriteFile(name, content string) Script {
	return func(t Turn) Reply {
		if t.ToolResults == 0 {
			if c, ok := WriteCall(t.Tools, "", name, content); ok {
				return Reply{Text: "I will write " + name + ".", Calls: []Call{c}}
			}
			if c, ok := PatchCall(t.Tools, name, content); ok {
				return Reply{Text: "I will add " + name + ".", Calls: []Call{c}}
			}
			if c, ok := ShellCall(t.Tools, "printf '%s' "+respShQuote(content)+" > "+respShQuote(name)); ok {
				return Reply{Text: "I will write " + name + " with the shell.", Calls: []Call{c}}
			}
		}
		return Reply{Text: "Done: " + name + " is written."}
	}
}

// ShellOnlyWriteFile is ShellWriteFile restricted to the shell tool: it
// proves that the agent runs commands.
func ShellOnlyWriteFile(name, content string) Script {
	return func(t Turn) Reply {
		if t.ToolResults == 0 {
			if c, ok := ShellCall(t.Tools, "printf '%s' "+respShQuote(content)+" > "+respShQuote(name)); ok {
				return Reply{Text: "I will write " + name + " with the shell.", Calls: []Call{c}}
			}
		}
		return Reply{Text: "Done: " + name + " is written."}
	}
}

// PatchCall builds a call of an apply_patch tool that adds the file name
// (relative to the working directory) with content: the freeform
// (custom) tool gets the patch as its input, a function tool in its
// "input" or "patch" property; else codex's code-mode tool calls its
// nested apply_patch (CodeModeCall). ok is false when no such tool is
// offered.
func PatchCall(tools []Tool, name, content string) (Call, bool) {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path.Clean(name) + "\n")
	for _, line := range strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n") {
		b.WriteString("+" + strings.TrimSuffix(line, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	patch := b.String()
	for _, t := range tools {
		if t.Name != "apply_patch" {
			continue
		}
		if t.Freeform {
			return Call{Name: t.Name, Input: patch}, true
		}
		props, _ := t.Schema["properties"].(map[string]any)
		for _, k := range []string{"input", "patch"} {
			if _, ok := props[k]; ok {
				return Call{Name: t.Name, Args: map[string]any{k: patch}}, true
			}
		}
	}
	return CodeModeCall(tools, "apply_patch", patch)
}

// CodeModeCall builds a call of codex's code-mode tool (the freeform
// "exec" tool that runs JavaScript, offered instead of the other tools to
// the models whose metadata say tool_mode = "code_mode_only") that calls
// the nested tool with arg (a string, or a value JSON-encoded into the
// script) and returns its result as text. ok is false when no such tool
// is offered.
func CodeModeCall(tools []Tool, tool string, arg any) (Call, bool) {
	for _, t := range tools {
		if t.Name == "exec" && t.Freeform {
			a, _ := json.Marshal(arg)
			js := "const r = await tools." + tool + "(" + string(a) + ");\n" +
				"text(typeof r === \"string\" ? r : JSON.stringify(r));\n"
			return Call{Name: t.Name, Input: js}, true
		}
	}
	return Call{}, false
}

// ShellCall builds a call of a shell tool that runs command (sh syntax) in
// the working directory, filling the arguments from the tool's schema:
// codex's exec_command ({"cmd": string}), shell_command ({"command":
// string}) and shell ({"command": ["bash", "-lc", string]}), or any tool
// called bash / run_shell_command / shell with a string "command"; else
// codex's code-mode tool calling exec_command (CodeModeCall). ok is false
// when no such tool is offered.
func ShellCall(tools []Tool, command string) (Call, bool) {
	for _, want := range []string{"exec_command", "shell_command", "shell", "bash", "Bash", "run_shell_command"} {
		for _, t := range tools {
			if t.Name != want || t.Freeform {
				continue
			}
			props, _ := t.Schema["properties"].(map[string]any)
			if _, ok := props["cmd"]; ok {
				return Call{Name: t.Name, Args: map[string]any{"cmd": command}}, true
			}
			p, ok := props["command"].(map[string]any)
			if !ok {
				continue
			}
			if p["type"] == "array" {
				return Call{Name: t.Name, Args: map[string]any{"command": []any{"bash", "-lc", command}}}, true
			}
			return Call{Name: t.Name, Args: map[string]any{"command": command}}, true
		}
	}
	return CodeModeCall(tools, "exec_command", map[string]any{"cmd": command})
}

// respShQuote quotes s for sh as one word.
func respShQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
