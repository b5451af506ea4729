package modelserver

import (
	"encoding/json"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
)

// WriteFile is the default script: while the conversation holds no tool
// result, a turn that offers a write-like tool calls it to write content to
// name (relative to the agent's working directory; made absolute with dir
// when the tool wants an absolute path, see WriteFileIn); every other turn
// answers with text.
func WriteFile(name, content string) Script { return WriteFileIn("", name, content) }

// WriteFileIn is WriteFile for tools that take absolute paths: dir is the
// agent's working directory as the agent sees it (e.g. /workspace inside
// the native sandbox).
func WriteFileIn(dir, name, content string) Script {
	return func(t Turn) Reply {
		if t.ToolResults == 0 {
			if c, ok := WriteCall(t.Tools, dir, name, content); ok {
				return Reply{Text: "I will write " + name + ".", Calls: []Call{c}}
			}
		}
		return Reply{Text: "Done: " + name + " is written."}
	}
}

// writeToolNames are the names coding agents give their file-writing
// tools, best first.
var writeToolNames = []string{"Write", "write_file", "write", "create_file", "str_replace_based_edit_tool", "edit_file"}

// WriteCall builds a call of the write-like tool among tools that writes
// content to name, filling the arguments from the tool's schema (a path
// property such as file_path, filePath, path or absolute_path; a content
// property such as content or text). ok is false when no such tool is
// offered.
func WriteCall(tools []Tool, dir, name, content string) (Call, bool) {
	for _, want := range writeToolNames {
		for _, t := range tools {
			if t.Name != want || t.Freeform {
				continue
			}
			props, _ := t.Schema["properties"].(map[string]any)
			pathKey, contentKey := "", ""
			for _, k := range []string{"file_path", "filePath", "absolute_path", "path", "filename"} {
				if _, ok := props[k]; ok {
					pathKey = k
					break
				}
			}
			for _, k := range []string{"content", "text", "file_text", "contents"} {
				if _, ok := props[k]; ok {
					contentKey = k
					break
				}
			}
			if pathKey == "" || contentKey == "" {
				continue
			}
			p := name
			if dir != "" {
				p = path.Join(dir, name)
			}
			args := map[string]any{pathKey: p, contentKey: content}
			if _, ok := props["command"]; ok && t.Name == "str_replace_based_edit_tool" {
				args["command"] = "create"
			}
			return Call{Name: t.Name, Args: args}, true
		}
	}
	return Call{}, false
}

// Text always answers with s.
func Text(s string) Script { return func(Turn) Reply { return Reply{Text: s} } }

// Fail answers every model turn with an error status.
func Fail(status int, msg string) Script {
	return func(Turn) Reply { return Reply{Status: status, ErrorMessage: msg} }
}

const maxBody = 64 << 20

func readAll(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

// contentText is the text of a message content in the OpenAI shapes: a
// JSON string, or an array of parts whose texts are joined by newlines;
// with types, only parts of those types count.
func contentText(raw json.RawMessage, types ...string) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text == "" || (len(types) > 0 && !slices.Contains(types, p.Type)) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}
