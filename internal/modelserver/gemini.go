package modelserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// Gemini API (generativelanguage.googleapis.com) wire format.
//
// Requests: POST /v1beta/models/{model}:generateContent answers one
// GenerateContentResponse; :streamGenerateContent?alt=sse streams one
// GenerateContentResponse per SSE "data:" line (each terminated by
// "\r\n\r\n", no event names, no [DONE]); without alt=sse it streams a JSON
// array of them. Every chunk carries usageMetadata, modelVersion and
// responseId; the last one also has finishReason and the final counts.
//
// Usage: promptTokenCount is Usage.Input, which (as in the real API)
// includes cachedContentTokenCount (Usage.Cached).
//
// JSON mode: a request with generationConfig.responseMimeType
// "application/json" (gemini-cli's generateJson side requests: next-speaker
// check, loop detection, …) is answered with the script's text when that is
// valid JSON, else with a value built from the request's response schema
// (see JSONForSchema).

// geminiRequest is the part of a GenerateContentRequest the server reads.
type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string         `json:"name"`
			Parameters           map[string]any `json:"parameters"`
			ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseSchema     map[string]any `json:"responseSchema"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text             *string         `json:"text"`
		Thought          bool            `json:"thought"`
		FunctionCall     json.RawMessage `json:"functionCall"`
		FunctionResponse json.RawMessage `json:"functionResponse"`
	} `json:"parts"`
}

// text joins the content's non-thought text parts.
func (c *geminiContent) text() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Text != nil && !p.Thought {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(*p.Text)
		}
	}
	return b.String()
}

// geminiModel is the model named in a request path such as
// /gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent.
func geminiModel(path string) string {
	m := path
	if i := strings.LastIndex(m, "/models/"); i >= 0 {
		m = m[i+len("/models/"):]
	} else if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	if i := strings.LastIndex(m, ":"); i >= 0 {
		m = m[:i]
	}
	return m
}

// serveGemini answers one generateContent or streamGenerateContent request.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, body []byte, n int, script Script) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, Gemini, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	if len(req.Contents) == 0 {
		s.writeError(w, Gemini, http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	turn := geminiTurn(r.URL.Path, req, body, n)
	rep := script(turn)
	if s.scriptedError(w, Gemini, rep) {
		return
	}
	rep.Text = geminiJSONText(req, rep)
	u := usageFor(rep, body)
	id := s.nextID("resp-")
	model := turn.Model
	if !turn.Stream {
		writeJSON(w, http.StatusOK, geminiChunk(rep.Text, rep.Calls, true, u, model, id))
		return
	}
	chunks := geminiChunks(rep, u, model, id)
	if r.URL.Query().Get("alt") != "sse" {
		writeGeminiArray(w, chunks)
		return
	}
	writeGeminiSSE(w, chunks)
}

// geminiTurn is the Turn of a request to path.
func geminiTurn(path string, req geminiRequest, body []byte, n int) Turn {
	turn := Turn{
		Protocol: Gemini,
		Model:    geminiModel(path),
		Stream:   strings.HasSuffix(path, ":streamGenerateContent"),
		System:   req.SystemInstruction.text(),
		N:        n,
		Body:     body,
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if schema == nil {
				schema = f.Parameters
			}
			turn.Tools = append(turn.Tools, Tool{Name: f.Name, Schema: schema})
		}
	}
	seen := map[string]bool{}
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if len(p.FunctionResponse) > 0 && string(p.FunctionResponse) != "null" {
				// gemini-cli repeats a resumed session's last tool
				// results; a result is counted once per call id.
				var fr struct{ ID, Name string }
				_ = json.Unmarshal(p.FunctionResponse, &fr)
				if fr.ID == "" || !seen[fr.ID] {
					turn.ToolResults++
				}
				if fr.ID != "" {
					seen[fr.ID] = true
				}
			}
			if (c.Role == "user" || c.Role == "") && p.Text != nil && *p.Text != "" && !p.Thought {
				turn.LastUser = *p.Text
			}
		}
	}
	return turn
}

// geminiJSONText is the text to answer with: in JSON mode, the script's
// text when it is valid JSON (or the reply calls functions), else a value
// built from the request's response schema; otherwise the script's text.
func geminiJSONText(req geminiRequest, rep Reply) string {
	gc := req.GenerationConfig
	if gc.ResponseMimeType != "application/json" || len(rep.Calls) > 0 || json.Valid([]byte(rep.Text)) {
		return rep.Text
	}
	schema := gc.ResponseJSONSchema
	if schema == nil {
		schema = gc.ResponseSchema
	}
	b, _ := json.Marshal(JSONForSchema(schema, rep.Text))
	return string(b)
}

// writeGeminiArray streams the chunks as one JSON array, as the API does
// without alt=sse.
func writeGeminiArray(w http.ResponseWriter, chunks []map[string]any) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	for i, c := range chunks {
		sep := ",\r\n"
		if i == 0 {
			sep = "["
		}
		b, _ := json.Marshal(c)
		_, _ = w.Write(append([]byte(sep), b...))
		if fl != nil {
			fl.Flush()
		}
	}
	_, _ = w.Write([]byte("]"))
}

// writeGeminiSSE streams the chunks as server-sent "data:" lines.
func writeGeminiSSE(w http.ResponseWriter, chunks []map[string]any) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		var buf bytes.Buffer
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\r\n\r\n")
		_, _ = w.Write(buf.Bytes())
		if fl != nil {
			fl.Flush()
		}
	}
}

// geminiChunks splits a reply into stream chunks: the text in a few pieces,
// then the function calls with the finish reason and the final usage.
func geminiChunks(rep Reply, u Usage, model, id string) []map[string]any {
	pieces := splitText(rep.Text, 3)
	var out []map[string]any
	for i, p := range pieces {
		last := i == len(pieces)-1 && len(rep.Calls) == 0
		out = append(out, geminiChunk(p, nil, last, u, model, id))
	}
	if len(rep.Calls) > 0 || len(out) == 0 {
		out = append(out, geminiChunk("", rep.Calls, true, u, model, id))
	}
	return out
}

// splitText cuts s into at most n pieces at spaces ("" gives none).
func splitText(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := len(s)/n + 1
	var out []string
	for len(s) > 0 {
		if len(s) <= size || len(out) == n-1 {
			out = append(out, s)
			break
		}
		cut := strings.IndexByte(s[size:], ' ')
		if cut < 0 {
			out = append(out, s)
			break
		}
		cut += size + 1
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// geminiChunk is one GenerateContentResponse. final adds the finish reason
// and the output token counts.
func geminiChunk(text string, calls []Call, final bool, u Usage, model, id string) map[string]any {
	parts := []any{}
	if text != "" {
		parts = append(parts, map[string]any{"text": text})
	}
	for i, c := range calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		p := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}}
		if i == 0 {
			// Thinking models sign the first function call of a turn.
			p["thoughtSignature"] = base64.StdEncoding.EncodeToString([]byte("modelserver-signature:" + id))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		parts = append(parts, map[string]any{"text": ""})
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	usage := map[string]any{
		"promptTokenCount":    u.Input,
		"totalTokenCount":     u.Input,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.Input}},
	}
	if u.Cached > 0 {
		usage["cachedContentTokenCount"] = u.Cached
		usage["cacheTokensDetails"] = []any{map[string]any{"modality": "TEXT", "tokenCount": u.Cached}}
	}
	if final {
		cand["finishReason"] = "STOP"
		usage["candidatesTokenCount"] = u.Output
		usage["totalTokenCount"] = u.Input + u.Output
	}
	return map[string]any{
		"candidates":    []any{cand},
		"usageMetadata": usage,
		"modelVersion":  model,
		"responseId":    id,
	}
}

// JSONForSchema builds a value that satisfies a (Gemini or JSON) schema,
// for JSON-mode side requests: every property of an object (required or
// not), the first element of an enum ("user" when the enum has it, which is
// what gemini-cli's next-speaker check needs to stop), text for strings,
// for numbers the schema's minimum, else 1 for integers (gemini-cli's
// router wants a complexity_score of 1-100: 1 is "trivial") and 0 for
// other numbers (its loop detector's confidence: 0 is "no loop"), false
// for booleans, an empty list for arrays.
func JSONForSchema(schema map[string]any, text string) any {
	if schema == nil {
		return map[string]any{}
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		for _, v := range e {
			if v == "user" {
				return v
			}
		}
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if m, ok := alts[0].(map[string]any); ok {
				return JSONForSchema(m, text)
			}
		}
	}
	typ, _ := schema["type"].(string)
	if ts, ok := schema["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		if text == "" {
			return "ok"
		}
		return text
	case "number", "integer":
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		if strings.EqualFold(typ, "integer") {
			return 1
		}
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for k, v := range props {
		m, _ := v.(map[string]any)
		out[k] = JSONForSchema(m, text)
	}
	return out
}
