package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/mcp"
)

// streamWait is how long one look at the run waits for news; a comment
// goes out after each empty look, so proxies keep the stream open.
const streamWait = "15s"

// tailAnswer is the hidden tail command's document (docs/json/
// mcp-tail.schema.json), as the stream passes it on.
type tailAnswer struct {
	Run    json.RawMessage   `json:"run"`
	Events []json.RawMessage `json:"events"`
	Output []json.RawMessage `json:"output"`
	Cursor mcp.Cursor        `json:"cursor"`
	Done   bool              `json:"done"`
}

// piece is as much of an output piece as the cursor needs.
type piece struct {
	Attempt int64 `json:"attempt"`
	Offset  int64 `json:"offset"`
}

// formatCursor is a cursor as an SSE event id: SEQ.ATTEMPT.OFFSET.
func formatCursor(c mcp.Cursor) string { return fmt.Sprintf("%d.%d.%d", c.Seq, c.Attempt, c.Offset) }

func parseCursor(s string) (mcp.Cursor, error) {
	if s == "" {
		return mcp.Cursor{}, nil
	}
	if parts := strings.Split(s, "."); len(parts) == 3 {
		var n [3]int64
		ok := true
		for i, p := range parts {
			v, err := strconv.ParseInt(p, 10, 64)
			ok = ok && err == nil && v >= 0
			n[i] = v
		}
		if ok {
			return mcp.Cursor{Seq: n[0], Attempt: n[1], Offset: n[2]}, nil
		}
	}
	return mcp.Cursor{}, catalog.BadRequest.New("cursor %q: want SEQ.ATTEMPT.OFFSET, as the stream's event ids", s)
}

// stream follows a run as Server-Sent Events until it has ended: "event"
// events (a journal entry), "output" events (agent or check output, one
// piece of the mcp tail document's output), then one "end" event (the run
// as submit's document). Every event's id is the cursor after it: a
// client that reconnects with Last-Event-ID (or ?cursor=) gets each event
// and each byte once.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "attempt", "check", "events", "cursor")
	in := mcp.LogsInput{ID: r.PathValue("id"), Attempt: q.num("attempt"), Check: q.str("check"), Events: q.on("events")}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	cur, err := parseCursor(cmp.Or(r.Header.Get("Last-Event-ID"), q.str("cursor")))
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := s.whileServing(r.Context())
	defer cancel()
	// The first look answers errors (no such run) with a status of their own.
	a, o := s.tail(ctx, in, cur, "0s")
	if o.err != nil {
		o.write(w, http.StatusOK)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	for {
		cur = writeAnswer(w, a, cur)
		if a.Done {
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", a.Run)
			flush()
			return
		}
		if len(a.Events) == 0 && len(a.Output) == 0 {
			fmt.Fprint(w, ": waiting\n\n")
		}
		flush()
		if ctx.Err() != nil {
			return
		}
		a, o = s.tail(ctx, in, cur, streamWait)
		if o.err != nil {
			if ctx.Err() == nil {
				b, _ := json.Marshal(errorDoc{Error: o.err})
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
			}
			return
		}
	}
}

// writeAnswer writes one tail answer's events and output, each with the
// cursor after it, and returns the cursor after all of it.
func writeAnswer(w http.ResponseWriter, a tailAnswer, cur mcp.Cursor) mcp.Cursor {
	for _, ev := range a.Events {
		var e struct {
			Seq int64 `json:"seq"`
		}
		_ = json.Unmarshal(ev, &e)
		cur.Seq = e.Seq
		fmt.Fprintf(w, "id: %s\nevent: event\ndata: %s\n\n", formatCursor(cur), ev)
	}
	for i, p := range a.Output {
		// A piece ends where the next begins (the next attempt's log, from
		// 0); the last where the answer's cursor stands.
		next := a.Cursor
		if i+1 < len(a.Output) {
			var np piece
			_ = json.Unmarshal(a.Output[i+1], &np)
			next = mcp.Cursor{Seq: cur.Seq, Attempt: np.Attempt, Offset: np.Offset}
		}
		next.Seq = cur.Seq
		cur = next
		fmt.Fprintf(w, "id: %s\nevent: output\ndata: %s\n\n", formatCursor(cur), p)
	}
	return a.Cursor
}

// tail runs the hidden tail command from cursor c.
func (s *Server) tail(ctx context.Context, in mcp.LogsInput, c mcp.Cursor, wait string) (tailAnswer, outcome) {
	o := s.run(ctx, in.TailArgv(c, wait), "")
	var a tailAnswer
	if o.err == nil {
		if err := json.Unmarshal(o.doc, &a); err != nil {
			o.err = catalog.Internal.New("read the tail document: %v", err)
		}
	}
	return a, o
}
