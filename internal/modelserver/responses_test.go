package modelserver

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// respPost posts body to srv's /openai/v1/responses with key.
func respPost(t *testing.T, srv *Server, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/openai/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func respDecode(t *testing.T, r io.Reader) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

type respEvent struct {
	name string
	data map[string]any
}

// respEvents reads every event of a Responses stream, checking that each
// data's type is the event name and that sequence numbers count from 0.
func respEvents(t *testing.T, r io.Reader) []respEvent {
	t.Helper()
	var evs []respEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data of %s: %v", name, err)
			}
			if d["type"] != name {
				t.Errorf("event %s carries type %v", name, d["type"])
			}
			if d["sequence_number"] != float64(len(evs)) {
				t.Errorf("event %d (%s) has sequence_number %v", len(evs), name, d["sequence_number"])
			}
			evs = append(evs, respEvent{name, d})
			name = ""
		case line == "":
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	return evs
}

func respEventNames(evs []respEvent) string {
	var n []string
	for _, e := range evs {
		n = append(n, e.name)
	}
	return strings.Join(n, " ")
}

func TestResponsesNonStreamText(t *testing.T) {
	srv := New(t, "k", "gpt-x", func(Turn) Reply {
		return Reply{Text: "Hello there.", Usage: &Usage{Input: 100, Output: 7, Cached: 40}}
	})
	resp := respPost(t, srv, "k", `{"model":"gpt-x","input":"hi","instructions":"be brief","store":false}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	m := respDecode(t, resp.Body)
	if m["object"] != "response" || m["status"] != "completed" || m["model"] != "gpt-x" ||
		!strings.HasPrefix(m["id"].(string), "resp_") || m["instructions"] != "be brief" || m["store"] != false {
		t.Errorf("response %v", m)
	}
	out := m["output"].([]any)
	if len(out) != 1 {
		t.Fatalf("output %v", out)
	}
	msg := out[0].(map[string]any)
	part := msg["content"].([]any)[0].(map[string]any)
	if msg["type"] != "message" || msg["role"] != "assistant" || msg["status"] != "completed" ||
		!strings.HasPrefix(msg["id"].(string), "msg_") || part["type"] != "output_text" || part["text"] != "Hello there." {
		t.Errorf("message %v", msg)
	}
	u := m["usage"].(map[string]any)
	if u["input_tokens"] != 100.0 || u["output_tokens"] != 7.0 || u["total_tokens"] != 107.0 ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != 40.0 ||
		u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != 0.0 {
		t.Errorf("usage %v", u)
	}
}

func TestResponsesStreamText(t *testing.T) {
	srv := New(t, "k", "gpt-x", Text("A longer answer that spans several deltas, ünïcode too."))
	resp := respPost(t, srv, "k", `{"model":"gpt-x","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := respEvents(t, resp.Body)
	names := respEventNames(evs)
	deltas := strings.Count(names, "response.output_text.delta")
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		strings.Repeat("response.output_text.delta ", deltas) +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if names != want || deltas < 2 {
		t.Fatalf("events\n%s\nwant\n%s", names, want)
	}
	created := evs[0].data["response"].(map[string]any)
	if created["status"] != "in_progress" || created["usage"] != nil || len(created["output"].([]any)) != 0 {
		t.Errorf("response.created %v", created)
	}
	var text strings.Builder
	for _, e := range evs {
		if e.name == "response.output_text.delta" {
			text.WriteString(e.data["delta"].(string))
			if e.data["output_index"] != 0.0 || e.data["content_index"] != 0.0 || e.data["item_id"] == "" {
				t.Errorf("delta %v", e.data)
			}
		}
	}
	if text.String() != "A longer answer that spans several deltas, ünïcode too." {
		t.Errorf("deltas make %q", text.String())
	}
	done := evs[len(evs)-1].data["response"].(map[string]any)
	if done["status"] != "completed" || done["usage"].(map[string]any)["total_tokens"].(float64) <= 0 {
		t.Errorf("response.completed %v", done)
	}
	if done["id"] != created["id"] {
		t.Errorf("ids %v, %v", created["id"], done["id"])
	}
}

func TestResponsesStreamToolCalls(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+a long enough line to be split in several deltas\n*** End Patch\n"
	srv := New(t, "k", "gpt-x", func(Turn) Reply {
		return Reply{Text: "Two calls.", Calls: []Call{
			{Name: "exec_command", Args: map[string]any{"cmd": "echo a long enough command to be split"}},
			{Name: "apply_patch", Input: patch},
		}}
	})
	body := `{"model":"gpt-x","stream":true,"input":"go","tools":[
		{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}},
		{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}}]}`
	evs := respEvents(t, respPost(t, srv, "k", body).Body)
	names := respEventNames(evs)
	for _, want := range []string{
		"response.output_item.added response.function_call_arguments.delta",
		"response.function_call_arguments.done response.output_item.done response.output_item.added response.custom_tool_call_input.delta",
		"response.custom_tool_call_input.done response.output_item.done response.completed",
	} {
		if !strings.Contains(names, want) {
			t.Errorf("events lack %q:\n%s", want, names)
		}
	}
	var args, input strings.Builder
	var items []map[string]any
	for _, e := range evs {
		switch e.name {
		case "response.function_call_arguments.delta":
			args.WriteString(e.data["delta"].(string))
			if e.data["output_index"] != 1.0 {
				t.Errorf("arguments delta %v", e.data)
			}
		case "response.custom_tool_call_input.delta":
			input.WriteString(e.data["delta"].(string))
			if e.data["output_index"] != 2.0 {
				t.Errorf("input delta %v", e.data)
			}
		case "response.function_call_arguments.done":
			if e.data["arguments"] != args.String() {
				t.Errorf("arguments.done %v, deltas %q", e.data["arguments"], args.String())
			}
		case "response.custom_tool_call_input.done":
			if e.data["input"] != patch {
				t.Errorf("input.done %q", e.data["input"])
			}
		case "response.output_item.added":
			it := e.data["item"].(map[string]any)
			if it["status"] != "in_progress" {
				t.Errorf("added item %v", it)
			}
		case "response.output_item.done":
			items = append(items, e.data["item"].(map[string]any))
		}
	}
	if input.String() != patch {
		t.Errorf("input deltas %q", input.String())
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(args.String()), &a); err != nil || a["cmd"] != "echo a long enough command to be split" {
		t.Errorf("arguments %q: %v", args.String(), err)
	}
	if len(items) != 3 || items[1]["type"] != "function_call" || items[2]["type"] != "custom_tool_call" ||
		items[1]["name"] != "exec_command" || items[2]["name"] != "apply_patch" || items[2]["input"] != patch ||
		!strings.HasPrefix(items[1]["call_id"].(string), "call_") || !strings.HasPrefix(items[1]["id"].(string), "fc_") ||
		items[1]["status"] != "completed" {
		t.Fatalf("items %v", items)
	}
	done := evs[len(evs)-1].data["response"].(map[string]any)
	if out := done["output"].([]any); len(out) != 3 {
		t.Errorf("completed output %v", out)
	}
	if tools := done["tools"].([]any); len(tools) != 2 {
		t.Errorf("completed response echoes tools %v", tools)
	}
}

func TestResponsesNonStreamToolCall(t *testing.T) {
	srv := New(t, "k", "gpt-x", func(Turn) Reply {
		return Reply{Calls: []Call{{Name: "shell", Args: map[string]any{"command": []any{"ls"}}}}}
	})
	m := respDecode(t, respPost(t, srv, "k", `{"model":"gpt-x","input":"go","tools":[{"type":"function","name":"shell","parameters":{}}]}`).Body)
	out := m["output"].([]any)
	if len(out) != 1 {
		t.Fatalf("output %v", out)
	}
	fc := out[0].(map[string]any)
	if fc["type"] != "function_call" || fc["name"] != "shell" || fc["arguments"] != `{"command":["ls"]}` || fc["call_id"] == "" {
		t.Errorf("call %v", fc)
	}
}

func TestResponsesTurn(t *testing.T) {
	var got Turn
	srv := New(t, "k", "gpt-x", func(tu Turn) Reply { got = tu; return Reply{Text: "ok"} })
	// A codex "lite" request: tools in an additional_tools input item, a
	// conversation with two tool results.
	body := `{"model":"gpt-y","stream":false,"instructions":"sys",
	"tools":[{"type":"function","name":"view_image","parameters":{"type":"object"}},{"type":"web_search"}],
	"input":[
	 {"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions","tools":[
	   {"type":"custom","name":"exec","format":{"type":"grammar"}},{"type":"function","name":"wait","parameters":{"type":"object"}}]},
	   {"type":"namespace","name":"clock","tools":[{"type":"function","name":"sleep","parameters":{}}]}]},
	 {"type":"message","role":"developer","content":[{"type":"input_text","text":"dev rules"}]},
	 {"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},
	 {"type":"function_call","call_id":"c1","name":"wait","arguments":"{}"},
	 {"type":"function_call_output","call_id":"c1","output":"done"},
	 {"type":"custom_tool_call","call_id":"c2","name":"exec","input":"1"},
	 {"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"ok"}]},
	 {"type":"reasoning","summary":[]},
	 {"type":"message","role":"user","content":"second"}]}`
	if resp := respPost(t, srv, "k", body); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got.Protocol != Responses || got.Model != "gpt-y" || got.Stream || got.ToolResults != 2 || got.N != 0 ||
		got.System != "sys\n\ndev rules" || got.LastUser != "second" || !strings.Contains(string(got.Body), "additional_tools") {
		t.Errorf("turn %+v", got)
	}
	var names []string
	for _, tl := range got.Tools {
		n := tl.Name
		if tl.Freeform {
			n += "(freeform)"
		}
		names = append(names, n)
	}
	if s := strings.Join(names, " "); s != "view_image web_search exec(freeform) wait clock__sleep" {
		t.Errorf("tools %s", s)
	}
	respPost(t, srv, "k", `{"model":"gpt-y","input":"again"}`)
	if got.N != 1 || got.LastUser != "again" || len(got.Tools) != 0 {
		t.Errorf("second turn %+v", got)
	}
}

func TestResponsesErrors(t *testing.T) {
	srv := New(t, "k", "gpt-x", Fail(429, "Rate limit reached"))
	resp := respPost(t, srv, "k", `{"model":"gpt-x","stream":true,"input":"hi"}`)
	m := respDecode(t, resp.Body)
	if resp.StatusCode != 429 || m["error"].(map[string]any)["message"] != "Rate limit reached" {
		t.Errorf("429: %d %v", resp.StatusCode, m)
	}
	resp = respPost(t, srv, "wrong", `{"model":"gpt-x","input":"hi"}`)
	m = respDecode(t, resp.Body)
	if resp.StatusCode != 401 || m["error"].(map[string]any)["code"] != "invalid_api_key" {
		t.Errorf("401: %d %v", resp.StatusCode, m)
	}
	resp = respPost(t, srv, "k", `{"model":`)
	if resp.StatusCode != 400 {
		t.Errorf("bad JSON: %d", resp.StatusCode)
	}
	resp = respPost(t, srv, "k", `{"input":"hi"}`)
	if resp.StatusCode != 400 {
		t.Errorf("no model: %d", resp.StatusCode)
	}
	if n := len(srv.ModelRequests(Responses)); n != 4 {
		t.Errorf("%d recorded requests", n)
	}
}

func TestShellWriteFileScripts(t *testing.T) {
	fn := func(name string, props map[string]any) Tool {
		return Tool{Name: name, Schema: map[string]any{"type": "object", "properties": props}}
	}
	str := map[string]any{"type": "string"}
	patch := "*** Begin Patch\n*** Add File: hello.txt\n+a\n+b\n*** End Patch\n"
	cases := []struct {
		tools []Tool
		want  Call
	}{
		{[]Tool{{Name: "apply_patch", Freeform: true}, fn("exec_command", map[string]any{"cmd": str})},
			Call{Name: "apply_patch", Input: patch}},
		{[]Tool{fn("apply_patch", map[string]any{"input": str})}, Call{Name: "apply_patch", Args: map[string]any{"input": patch}}},
		{[]Tool{fn("exec_command", map[string]any{"cmd": str})},
			Call{Name: "exec_command", Args: map[string]any{"cmd": `printf '%s' 'a` + "\n" + `b` + "\n" + `' > 'hello.txt'`}}},
		{[]Tool{fn("shell", map[string]any{"command": map[string]any{"type": "array"}})},
			Call{Name: "shell", Args: map[string]any{"command": []any{"bash", "-lc", `printf '%s' 'a` + "\n" + `b` + "\n" + `' > 'hello.txt'`}}}},
		{[]Tool{{Name: "exec", Freeform: true}},
			Call{Name: "exec", Input: "const r = await tools.apply_patch(" + respJSON(patch) + ");\ntext(typeof r === \"string\" ? r : JSON.stringify(r));\n"}},
	}
	for i, c := range cases {
		rep := ShellWriteFile("hello.txt", "a\nb\n")(Turn{Tools: c.tools})
		if len(rep.Calls) != 1 || respJSON(rep.Calls[0]) != respJSON(c.want) {
			t.Errorf("case %d: %+v, want %+v", i, rep.Calls, c.want)
		}
	}
	if rep := ShellWriteFile("hello.txt", "x")(Turn{Tools: cases[0].tools, ToolResults: 1}); len(rep.Calls) != 0 || rep.Text == "" {
		t.Errorf("after a tool result: %+v", rep)
	}
	if rep := ShellWriteFile("hello.txt", "x")(Turn{}); len(rep.Calls) != 0 {
		t.Errorf("no tools: %+v", rep)
	}
	c, ok := ShellCall([]Tool{{Name: "exec", Freeform: true}}, "ls")
	if !ok || c.Input != "const r = await tools.exec_command({\"cmd\":\"ls\"});\ntext(typeof r === \"string\" ? r : JSON.stringify(r));\n" {
		t.Errorf("code-mode shell call %+v", c)
	}
	if rep := ShellOnlyWriteFile("f", "x")(Turn{Tools: cases[0].tools}); len(rep.Calls) != 1 || rep.Calls[0].Name != "exec_command" {
		t.Errorf("shell only: %+v", rep)
	}
}

func respJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
