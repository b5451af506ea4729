package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxWait bounds how long one logs call waits for news: a client that
// wants to follow longer calls again with the cursor.
const maxWait = 60

// awaitStep is how long one look of a waiting submit or resume waits for
// news before it looks again (the client's cancel ends it sooner).
const awaitStep = "10s"

// tailDoc is the part of the hidden tail command's answer (docs/json/
// mcp-tail.schema.json) that following needs.
type tailDoc struct {
	Run    json.RawMessage `json:"run"`
	Events []event         `json:"events"`
	Cursor Cursor          `json:"cursor"`
	Done   bool            `json:"done"`
}

// event is a journal event, as much of it as a progress message says.
type event struct {
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	Reason  string          `json:"reason"`
	Attempt int             `json:"attempt"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// summary is one line about the event, for a progress notification.
func (e event) summary() string {
	switch e.Type {
	case "state":
		s := "state " + e.Status
		if e.Reason != "" && e.Reason != e.Status && e.Reason != "completed" {
			s += " (" + e.Reason + ")"
		}
		if e.Message != "" && e.Message != e.Status {
			s += ": " + e.Message
		}
		return s
	case "attempt":
		return fmt.Sprintf("attempt %d started", e.Attempt)
	case "check":
		var d struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		}
		_ = json.Unmarshal(e.Data, &d)
		verdict := "failed"
		if d.Passed {
			verdict = "passed"
		}
		return fmt.Sprintf("check %s %s", d.Name, verdict)
	}
	if e.Message != "" {
		return e.Type + ": " + oneLine(e.Message)
	}
	return e.Type
}

// logs reads a run's logs: whole, or what is new since a cursor.
func (s *Server) logs(ctx context.Context, _ *sdk.CallToolRequest, in LogsInput) (*sdk.CallToolResult, any, error) {
	if !in.following() {
		return s.run(ctx, in.argv(), "").result(), nil, nil
	}
	var c Cursor
	if in.Cursor != nil {
		c = *in.Cursor
	}
	wait := ""
	if in.WaitSec > 0 {
		wait = fmt.Sprintf("%ds", min(in.WaitSec, maxWait))
	}
	return s.run(ctx, in.tailArgv(c, wait), "").result(), nil, nil
}

// await follows the run that started (o is its submit or resume
// document) through its journal until it has ended, sending a progress
// notification for each event when the request carries a progress token.
// It returns the ended run as submit --wait --json prints it.
func (s *Server) await(ctx context.Context, req *sdk.CallToolRequest, o outcome) outcome {
	var started struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(o.doc, &started); err != nil || started.ID == "" {
		return outcome{err: &CatalogError{Code: "internal", What: "internal error", Exit: 70,
			Cause: "the started run has no id: " + oneLine(string(o.doc))}}
	}
	var token any
	if req != nil && req.Params != nil {
		token = req.Params.GetProgressToken()
	}
	var c Cursor
	for {
		t := s.run(ctx, LogsInput{ID: started.ID, Events: true}.tailArgv(c, awaitStep), "")
		if t.err != nil {
			return t
		}
		var doc tailDoc
		if err := json.Unmarshal(t.doc, &doc); err != nil {
			return outcome{err: &CatalogError{Code: "internal", What: "internal error", Exit: 70,
				Cause: "cannot read the run's journal: " + err.Error()}}
		}
		for _, e := range doc.Events {
			if token == nil || req.Session == nil {
				break
			}
			// Progress must grow: the event's seq does, and no total
			// is known before the run ends.
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
				Progress: float64(e.Seq), Message: strings.TrimSpace(e.summary())})
		}
		c = doc.Cursor
		if doc.Done {
			return outcome{doc: doc.Run, warnings: o.warnings}
		}
	}
}
