package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
)

// outcome is what one command line printed: its --json document or its
// catalog error, and what it said on stderr (warnings).
type outcome struct {
	doc      []byte
	err      *catalog.Error
	warnings []string
}

// run runs one command line in process. A command that printed no JSON
// document is an internal error carrying what it said.
func (s *Server) run(ctx context.Context, args []string, stdin string) outcome {
	stdout, stderr, exit := s.o.Exec(ctx, args, strings.NewReader(stdin))
	var o outcome
	for _, l := range strings.Split(strings.TrimSpace(string(stderr)), "\n") {
		if l = strings.TrimSpace(strings.TrimPrefix(l, "warning: ")); l != "" {
			o.warnings = append(o.warnings, l)
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, stdout); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("{")) {
		o.err = catalog.Internal.New("agentrun %s exited %d without a JSON document: %s", args[0], exit, strings.Join(o.warnings, "; "))
		return o
	}
	var doc errorDoc
	if json.Unmarshal(buf.Bytes(), &doc) == nil && doc.Error != nil {
		o.err = doc.Error
		return o
	}
	o.doc = buf.Bytes()
	return o
}

// write answers with the outcome: the document with status, or the error.
// Warnings ride in Agentrun-Warning headers (the body is the command's
// document, nothing more).
func (o outcome) write(w http.ResponseWriter, status int) {
	for _, wn := range o.warnings {
		w.Header().Add("Agentrun-Warning", strings.Join(strings.Fields(wn), " "))
	}
	if o.err != nil {
		writeDoc(w, httpStatus(o.err), errorDoc{Error: o.err})
		return
	}
	writeRaw(w, status, o.doc)
}
