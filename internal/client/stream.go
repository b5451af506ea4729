package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
)

// Event is one Server-Sent Event of GET /v1/runs/{id}/logs/stream: Name
// "event" (a journal entry), "output" (a piece of output) or "end" (the
// run as submit's document); Data is its JSON.
type Event struct {
	Name string
	Data json.RawMessage
}

// reconnects bounds how often a stream that broke is picked up again
// (from the last event id, so nothing is seen twice).
const reconnects = 5

// Stream follows run id's stream (query: attempt, check, events) until its
// end event, calling fn with each event (the end one too). A connection
// that breaks is resumed from the last event's id; an error event ends
// the stream with its catalog error.
func (c *Client) Stream(ctx context.Context, id string, query url.Values, fn func(Event) error) error {
	last := ""
	for try := 0; ; try++ {
		ended, err := c.streamOnce(ctx, id, query, &last, fn)
		if ended || err == nil {
			return err
		}
		var ce *catalog.Error
		if !errors.As(err, &ce) || ce.Code != catalog.ServerUnreachable.Code || try == reconnects || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
		}
	}
}

// streamOnce reads one connection of the stream; ended says the stream
// came to its end (or to an error of the server's), not to a broken
// connection.
func (c *Client) streamOnce(ctx context.Context, id string, query url.Values, last *string, fn func(Event) error) (ended bool, err error) {
	resp, err := c.send(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/logs/stream", query, nil, "", *last)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, err := c.read(resp)
		if err == nil {
			err = catalog.ServerProtocol.New("GET %s answered %s, not an event stream", resp.Request.URL.Path, resp.Status)
		}
		return true, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxDoc)
	var name, evID string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name == "" && data.Len() == 0 {
				continue
			}
			ev := Event{Name: name, Data: json.RawMessage(data.String())}
			name = ""
			data.Reset()
			if evID != "" {
				*last = evID
			}
			if ev.Name == "error" {
				var doc struct {
					Error *catalog.Error `json:"error"`
				}
				if json.Unmarshal(ev.Data, &doc) == nil && doc.Error != nil {
					return true, c.serverError(resp, doc.Error)
				}
				return true, catalog.ServerProtocol.New("the stream of run %s ended with an error event the CLI cannot read", id)
			}
			if !json.Valid(ev.Data) {
				return true, catalog.ServerProtocol.New("the stream of run %s sent an event that is not JSON", id)
			}
			if err := fn(ev); err != nil {
				return true, err
			}
			if ev.Name == "end" {
				return true, nil
			}
		case strings.HasPrefix(line, ":"):
			// A comment: the server is alive.
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name = value
			case "id":
				evID = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
		}
	}
	err = sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return false, c.transport(err)
}
