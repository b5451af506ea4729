package modelserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const geminiTestKey = "gemini-test-key"

// geminiBody is a request as gemini-cli sends it: system instruction,
// tools (one with parametersJsonSchema, one with OpenAPI parameters), a
// conversation with a function call and its result.
const geminiBody = `{
  "contents": [
    {"role": "user", "parts": [{"text": "<session_context>ctx</session_context>"}, {"text": "Write hello.txt"}]},
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "/w/a"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "x"}}}]}
  ],
  "systemInstruction": {"role": "user", "parts": [{"text": "You are a CLI agent."}]},
  "tools": [{"functionDeclarations": [
    {"name": "write_file", "description": "w", "parametersJsonSchema": {"type": "object",
      "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"]}},
    {"name": "run_shell_command", "description": "s", "parameters": {"type": "OBJECT",
      "properties": {"command": {"type": "STRING"}}}}
  ]}],
  "generationConfig": {"temperature": 1}
}`

func geminiPost(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// geminiResp is the part of a GenerateContentResponse the tests read.
type geminiResp struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				FunctionCall *struct {
					Name string         `json:"name"`
					Args map[string]any `json:"args"`
				} `json:"functionCall"`
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
		Index        *int   `json:"index"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// geminiSSE parses an alt=sse stream strictly: "data: " lines, each
// event ending in "\r\n\r\n" as the real API (and the SDK's regexp) does.
func geminiSSE(t *testing.T, resp *http.Response) []geminiResp {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	if !bytes.HasSuffix(b, []byte("\r\n\r\n")) {
		t.Fatalf("stream does not end in CRLFCRLF: %q", b)
	}
	var out []geminiResp
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\r\n\r\n"), "\r\n\r\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("bad event %q", ev)
		}
		var r geminiResp
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, r)
	}
	return out
}

func TestGeminiTurnParsing(t *testing.T) {
	var got Turn
	srv := New(t, geminiTestKey, "gemini-2.5-pro", func(tu Turn) Reply { got = tu; return Reply{Text: "ok"} })
	resp := geminiPost(t, srv.URL+"/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", geminiTestKey, geminiBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	geminiSSE(t, resp)
	if got.Protocol != Gemini || got.Model != "gemini-2.5-pro" || !got.Stream || got.N != 0 {
		t.Errorf("turn = %+v", got)
	}
	if got.System != "You are a CLI agent." || got.LastUser != "Write hello.txt" || got.ToolResults != 1 {
		t.Errorf("system %q, last user %q, tool results %d", got.System, got.LastUser, got.ToolResults)
	}
	if len(got.Tools) != 2 || got.Tools[0].Name != "write_file" || got.Tools[1].Name != "run_shell_command" {
		t.Fatalf("tools = %+v", got.Tools)
	}
	for _, tl := range got.Tools {
		if _, ok := tl.Schema["properties"].(map[string]any); !ok || tl.Freeform {
			t.Errorf("tool %s schema = %v", tl.Name, tl.Schema)
		}
	}
	if len(srv.ModelRequests(Gemini)) != 1 {
		t.Error("request not recorded as gemini")
	}
}

func TestGeminiToolResultsOncePerID(t *testing.T) {
	// gemini-cli repeats the last tool results of a resumed session.
	var got Turn
	srv := New(t, geminiTestKey, "m", func(tu Turn) Reply { got = tu; return Reply{Text: "ok"} })
	body := `{"contents": [
	  {"role": "user", "parts": [{"text": "go"}]},
	  {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "x", "args": {}}}, {"functionCall": {"name": "y", "args": {}}}]},
	  {"role": "user", "parts": [{"functionResponse": {"id": "a", "name": "x", "response": {}}}, {"functionResponse": {"id": "a", "name": "x", "response": {}}},
	    {"functionResponse": {"name": "y", "response": {}}}]},
	  {"role": "user", "parts": [{"text": "next"}]}]}`
	resp := geminiPost(t, srv.URL+"/v1beta/models/m:generateContent", geminiTestKey, body)
	if resp.StatusCode != 200 || got.ToolResults != 2 || got.LastUser != "next" || got.Stream {
		t.Fatalf("status %d, turn %+v", resp.StatusCode, got)
	}
}

func TestGeminiNonStreamWriteCall(t *testing.T) {
	srv := New(t, geminiTestKey, "gemini-2.5-pro", WriteFileIn("/w", "hello.txt", "hi\n"))
	body := strings.Replace(geminiBody, `{"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "/w/a"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "read_file", "response": {"output": "x"}}}]}`, `{"role": "model", "parts": [{"text": "hm"}]}`, 1)
	if body == geminiBody {
		t.Fatal("test body not rewritten")
	}
	resp := geminiPost(t, srv.URL+"/gemini/v1beta/models/gemini-2.5-pro:generateContent", geminiTestKey, body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var r geminiResp
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Candidates) != 1 {
		t.Fatalf("candidates = %+v", r.Candidates)
	}
	c := r.Candidates[0]
	if c.Content.Role != "model" || c.FinishReason != "STOP" || c.Index == nil || *c.Index != 0 || len(c.Content.Parts) != 2 {
		t.Fatalf("candidate = %+v", c)
	}
	if p := c.Content.Parts[0]; p.Text == nil || *p.Text != "I will write hello.txt." {
		t.Errorf("text part = %+v", p)
	}
	fc := c.Content.Parts[1].FunctionCall
	if fc == nil || fc.Name != "write_file" || fc.Args["file_path"] != "/w/hello.txt" || fc.Args["content"] != "hi\n" {
		t.Errorf("function call = %+v", fc)
	}
	if c.Content.Parts[1].ThoughtSignature == "" {
		t.Error("first function call has no thoughtSignature")
	}
	u := r.UsageMetadata
	if u == nil || u.PromptTokenCount <= 0 || u.CandidatesTokenCount <= 0 || u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount {
		t.Errorf("usage = %+v", u)
	}
	if r.ModelVersion != "gemini-2.5-pro" || r.ResponseID == "" {
		t.Errorf("modelVersion %q responseId %q", r.ModelVersion, r.ResponseID)
	}
}

func TestGeminiStreamText(t *testing.T) {
	text := "Done: hello.txt is written, and here are a few more words to split."
	srv := New(t, geminiTestKey, "m", func(Turn) Reply {
		return Reply{Text: text, Usage: &Usage{Input: 100, Output: 20, Cached: 60}}
	})
	resp := geminiPost(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", geminiTestKey, geminiBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	chunks := geminiSSE(t, resp)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks, want the text in pieces", len(chunks))
	}
	var all strings.Builder
	id := chunks[0].ResponseID
	for i, c := range chunks {
		last := i == len(chunks)-1
		if len(c.Candidates) != 1 || c.ResponseID != id || c.ModelVersion != "gemini-2.5-flash" || c.UsageMetadata == nil {
			t.Fatalf("chunk %d = %+v", i, c)
		}
		if (c.Candidates[0].FinishReason == "STOP") != last {
			t.Errorf("chunk %d finishReason %q", i, c.Candidates[0].FinishReason)
		}
		if c.UsageMetadata.PromptTokenCount != 100 || c.UsageMetadata.CachedContentTokenCount != 60 {
			t.Errorf("chunk %d usage %+v", i, c.UsageMetadata)
		}
		for _, p := range c.Candidates[0].Content.Parts {
			if p.Text != nil {
				all.WriteString(*p.Text)
			}
		}
	}
	if all.String() != text {
		t.Errorf("streamed text %q", all.String())
	}
	u := chunks[len(chunks)-1].UsageMetadata
	if u.CandidatesTokenCount != 20 || u.TotalTokenCount != 120 {
		t.Errorf("final usage %+v", u)
	}
}

func TestGeminiStreamCalls(t *testing.T) {
	srv := New(t, geminiTestKey, "m", func(Turn) Reply {
		return Reply{Text: "Two calls.", Calls: []Call{
			{Name: "run_shell_command", Args: map[string]any{"command": "ls"}},
			{Name: "write_file", Args: map[string]any{"file_path": "/w/a", "content": "x"}},
		}}
	})
	chunks := geminiSSE(t, geminiPost(t, srv.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", geminiTestKey, geminiBody))
	last := chunks[len(chunks)-1]
	if last.Candidates[0].FinishReason != "STOP" {
		t.Fatalf("last chunk %+v", last)
	}
	var names []string
	for _, c := range chunks {
		for _, p := range c.Candidates[0].Content.Parts {
			if p.FunctionCall != nil {
				names = append(names, p.FunctionCall.Name)
			}
		}
	}
	if strings.Join(names, ",") != "run_shell_command,write_file" {
		t.Errorf("calls %v", names)
	}
	if p := last.Candidates[0].Content.Parts; len(p) != 2 || p[0].FunctionCall.Args["command"] != "ls" || p[0].ThoughtSignature == "" {
		t.Errorf("call parts %+v", p)
	}
}

func TestGeminiStreamJSONArray(t *testing.T) {
	// Without alt=sse the API streams one JSON array of responses.
	srv := New(t, geminiTestKey, "m", Text("hello there"))
	resp := geminiPost(t, srv.URL+"/v1beta/models/m:streamGenerateContent", geminiTestKey, geminiBody)
	var arr []geminiResp
	if err := json.NewDecoder(resp.Body).Decode(&arr); err != nil || len(arr) == 0 {
		t.Fatalf("array: %v, %d", err, len(arr))
	}
	if arr[len(arr)-1].Candidates[0].FinishReason != "STOP" {
		t.Errorf("last %+v", arr[len(arr)-1])
	}
}

func TestGeminiJSONMode(t *testing.T) {
	// gemini-cli's next-speaker check and model router (generateJson).
	srv := New(t, geminiTestKey, "m", nil)
	for _, tc := range []struct{ schema, check string }{
		{`{"type": "object", "properties": {"reasoning": {"type": "string"}, "next_speaker": {"type": "string", "enum": ["model", "user"]}}, "required": ["reasoning", "next_speaker"]}`, "next_speaker"},
		{`{"type": "OBJECT", "properties": {"complexity_reasoning": {"type": "STRING"}, "complexity_score": {"type": "INTEGER"}}}`, "complexity_score"},
		{`{"type": "object", "properties": {"unproductive_state_analysis": {"type": "string"}, "unproductive_state_confidence": {"type": "number"}}}`, "unproductive_state_confidence"},
	} {
		for _, field := range []string{"responseJsonSchema", "responseSchema"} {
			body := `{"contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
			  "generationConfig": {"responseMimeType": "application/json", "` + field + `": ` + tc.schema + `}}`
			resp := geminiPost(t, srv.URL+"/v1beta/models/m:generateContent", geminiTestKey, body)
			var r geminiResp
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(*r.Candidates[0].Content.Parts[0].Text), &v); err != nil {
				t.Fatalf("%s: reply is not JSON: %v", field, err)
			}
			switch tc.check {
			case "next_speaker":
				if v["next_speaker"] != "user" || v["reasoning"] == "" {
					t.Errorf("next speaker reply %v", v)
				}
			case "complexity_score":
				if v["complexity_score"] != 1.0 || v["complexity_reasoning"] == nil {
					t.Errorf("router reply %v", v)
				}
			default:
				if v[tc.check] != 0.0 {
					t.Errorf("loop reply %v", v)
				}
			}
		}
	}
	// A script that answers with JSON is passed through.
	srv.SetScript(Text(`{"next_speaker": "model", "reasoning": "more"}`))
	body := `{"contents": [{"role": "user", "parts": [{"text": "x"}]}], "generationConfig": {"responseMimeType": "application/json"}}`
	var r geminiResp
	_ = json.NewDecoder(geminiPost(t, srv.URL+"/v1beta/models/m:generateContent", geminiTestKey, body).Body).Decode(&r)
	if !strings.Contains(*r.Candidates[0].Content.Parts[0].Text, `"model"`) {
		t.Errorf("JSON reply replaced: %q", *r.Candidates[0].Content.Parts[0].Text)
	}
}

func TestGeminiErrors(t *testing.T) {
	srv := New(t, geminiTestKey, "m", Fail(429, "Resource has been exhausted (e.g. check quota)."))
	check := func(resp *http.Response, status int, st string) {
		t.Helper()
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != status || e.Error.Code != status || e.Error.Status != st || e.Error.Message == "" {
			t.Errorf("got %d %+v, want %d %s", resp.StatusCode, e, status, st)
		}
	}
	url := srv.URL + "/gemini/v1beta/models/m:streamGenerateContent?alt=sse"
	check(geminiPost(t, url, geminiTestKey, geminiBody), 429, "RESOURCE_EXHAUSTED")
	check(geminiPost(t, url, "wrong", geminiBody), 401, "UNAUTHENTICATED")
	check(geminiPost(t, url, "", geminiBody), 401, "UNAUTHENTICATED")
	check(geminiPost(t, url+"&key="+geminiTestKey, "", `{"contents": []}`), 400, "INVALID_ARGUMENT")
	check(geminiPost(t, url, geminiTestKey, `{`), 400, "INVALID_ARGUMENT")
	// ?key= is accepted as the key.
	srv.SetScript(Text("ok"))
	if resp := geminiPost(t, srv.URL+"/v1beta/models/m:generateContent?key="+geminiTestKey, "", geminiBody); resp.StatusCode != 200 {
		t.Errorf("?key=: status %d", resp.StatusCode)
	}
}

func TestSplitText(t *testing.T) {
	for _, s := range []string{"", "x", "one two", "a b c d e f g h i j k l m n o p", "nospaceatallinthisverylongstring"} {
		p := splitText(s, 3)
		if strings.Join(p, "") != s || len(p) > 3 || (s == "" && len(p) != 0) {
			t.Errorf("splitText(%q) = %q", s, p)
		}
	}
}
