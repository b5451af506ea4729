package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Exec runs one agentrun command line in process: args without the
// program name, stdin as the command's standard input. It returns what the
// command printed and its exit status, as the binary would.
type Exec func(ctx context.Context, args []string, stdin io.Reader) (stdout, stderr []byte, exit int)

// CatalogError is the error object the CLI prints under --json.
type CatalogError struct {
	Code  string `json:"code"`
	What  string `json:"error"`
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
	Doc   string `json:"doc,omitempty"`
	Exit  int    `json:"exit_code"`
}

func (e *CatalogError) Error() string {
	s := e.What
	if e.Cause != "" {
		s += ": " + e.Cause
	}
	return s
}

// text is the error as the CLI says it to people.
func (e *CatalogError) text() string {
	s := "error: " + e.Error()
	if e.Fix != "" {
		s += "\n  fix: " + e.Fix
	}
	if e.Doc != "" {
		s += "\n  see: " + e.Doc
	}
	return s
}

// outcome is what one command line printed: its --json document, or its
// catalog error.
type outcome struct {
	doc      json.RawMessage // the document, compact
	err      *CatalogError   // the catalog error, when the command printed one
	warnings string          // what it said on stderr (warnings)
}

// run runs one command line and reads its --json output. A command that
// printed no JSON document at all is reported as an internal catalog
// error with what it said on stderr, so a client always gets the
// catalog's shape.
func (s *Server) run(ctx context.Context, args []string, stdin string) outcome {
	stdout, stderr, exit := s.exec(ctx, args, strings.NewReader(stdin))
	o := outcome{warnings: strings.TrimSpace(string(stderr))}
	var buf bytes.Buffer
	if err := json.Compact(&buf, stdout); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("{")) {
		o.err = &CatalogError{Code: "internal", What: "internal error", Exit: 70,
			Cause: fmt.Sprintf("agentrun %s exited %d without a JSON document: %s", args[0], exit, oneLine(o.warnings)),
			Fix:   "report this with the command and output"}
		return o
	}
	var doc struct {
		Error *CatalogError `json:"error"`
	}
	if json.Unmarshal(buf.Bytes(), &doc) == nil && doc.Error != nil {
		o.err = doc.Error
		return o
	}
	o.doc = buf.Bytes()
	return o
}

// result is the tool result of an outcome: the document as structured
// content (and as its text, for clients that read only text), or a tool
// error carrying the catalog error as {"error": {...}}.
func (o outcome) result() *sdk.CallToolResult {
	if o.err != nil {
		b, _ := json.Marshal(map[string]any{"error": o.err})
		res := &sdk.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b),
			Content: []sdk.Content{&sdk.TextContent{Text: o.err.text()}}}
		return withWarnings(res, o.warnings)
	}
	res := &sdk.CallToolResult{StructuredContent: o.doc, Content: []sdk.Content{&sdk.TextContent{Text: string(o.doc)}}}
	return withWarnings(res, o.warnings)
}

// withWarnings adds what the command said on stderr (its warnings, such
// as a backend that isolates nothing) as a text of its own.
func withWarnings(res *sdk.CallToolResult, warnings string) *sdk.CallToolResult {
	if warnings != "" {
		res.Content = append(res.Content, &sdk.TextContent{Text: warnings})
	}
	return res
}

// oneLine is s on one line, for a cause.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 500 {
		s = string(r[:500]) + "…"
	}
	if s == "" {
		s = "it printed nothing"
	}
	return s
}
