package cli

// mcp_tail.go is the hidden command behind the MCP logs tool's cursor:
// what a run has written since a cursor (the journal's event seq, the
// byte offset in an attempt's log), so that a client polling over MCP
// gets each event and each byte once.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// One answer carries at most this many events and output bytes; the
// cursor then stops there and done is false.
const (
	maxTailEvents = 1000
	maxTailBytes  = 256 << 10
	maxTailWait   = time.Minute
	tailPoll      = 100 * time.Millisecond
)

type tailOptions struct {
	ID         string
	Seq        int64
	Attempt    int
	Offset     int64
	Check      string
	EventsOnly bool
	Wait       time.Duration
}

func (o *tailOptions) Validate() error {
	switch {
	case o.Seq < 0 || o.Attempt < 0 || o.Offset < 0:
		return catalog.Usage.New("--seq, --attempt and --offset are never negative")
	case o.Check != "" && !checkName.MatchString(o.Check):
		return catalog.Usage.New("--check %q is not a check name (letters, digits, '.', '-', '_')", o.Check)
	case o.Wait < 0 || o.Wait > maxTailWait:
		return catalog.Usage.New("--wait %s: at most %s", o.Wait, maxTailWait)
	}
	return nil
}

func (app *App) newMCPTailCmd() *cobra.Command {
	o := &tailOptions{}
	c := &cobra.Command{
		Use:    "tail ID [--seq N] [--attempt A --offset O] [--check NAME] [--events-only] [--wait D]",
		Short:  "What a run has written since a cursor (the MCP logs tool's follow)",
		Hidden: true,
		Long: `Print, as one JSON document, the run (as submit --json shows it), the journal
events after --seq, and the agent's output (or check NAME's) from byte
--offset of attempt --attempt on, then the cursor to pass next time. Output
comes in whole lines while more may be written. done is true once the run
has ended and all of it has been printed. --wait D waits up to D for
something new.`,
		Args: exactArgs(1, "tail needs one run ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			if err := o.Validate(); err != nil {
				return err
			}
			return app.runTail(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.Int64Var(&o.Seq, "seq", 0, "the last journal event read")
	f.IntVar(&o.Attempt, "attempt", 0, "the attempt whose output to read from (default 1)")
	f.Int64Var(&o.Offset, "offset", 0, "the byte offset in that attempt's log to read from")
	f.StringVar(&o.Check, "check", "", "check NAME's output instead of the agent's")
	f.BoolVar(&o.EventsOnly, "events-only", false, "only the journal")
	f.DurationVar(&o.Wait, "wait", 0, "wait up to this long for something new")
	return c
}

// tailOutput is `mcp tail --json` (docs/json/mcp-tail.schema.json).
type tailOutput struct {
	ID     string       `json:"id"`
	Run    submitOutput `json:"run"`
	Events []run.Event  `json:"events"`
	Output []tailPiece  `json:"output"`
	Cursor tailCursor   `json:"cursor"`
	// Done: the run has ended and everything up to its end is in this
	// answer or was in earlier ones.
	Done bool `json:"done"`
}

// tailPiece is output of one attempt, from byte Offset of its log.
type tailPiece struct {
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"` // agent | check
	Name    string `json:"name,omitempty"`
	Offset  int64  `json:"offset"`
	Text    string `json:"text"`
}

type tailCursor struct {
	Seq     int64 `json:"seq"`
	Attempt int   `json:"attempt"`
	Offset  int64 `json:"offset"`
}

func (app *App) runTail(ctx context.Context, o *tailOptions) error {
	env, r, err := app.lookupRun(ctx, o.ID)
	if err != nil {
		return err
	}
	f := &follower{app: app, env: env, id: r.ID, poll: tailPoll}
	deadline := time.Now().Add(o.Wait)
	for {
		out, err := app.tailOnce(ctx, o, f)
		if err != nil {
			return err
		}
		if out.Done || len(out.Events) > 0 || len(out.Output) > 0 || !time.Now().Before(deadline) {
			return writeJSON(app.Stdout, out)
		}
		if err := f.sleep(ctx); err != nil {
			return err
		}
	}
}

// tailOnce reads the run first, then its journal and output: once the run
// has ended, what is read after it is complete.
func (app *App) tailOnce(ctx context.Context, o *tailOptions, f *follower) (tailOutput, error) {
	r, err := f.refresh(ctx)
	if err != nil {
		return tailOutput{}, err
	}
	evs, err := f.env.Store.Events(ctx, r.ID, o.Seq)
	if err != nil {
		return tailOutput{}, fmt.Errorf("read events: %w", err)
	}
	cut := len(evs) > maxTailEvents
	if cut {
		evs = evs[:maxTailEvents]
	}
	cur := tailCursor{Seq: o.Seq, Attempt: max(o.Attempt, 1), Offset: o.Offset}
	if len(evs) > 0 {
		cur.Seq = evs[len(evs)-1].Seq
	}
	out := tailOutput{ID: r.ID, Run: toSubmitOutput(f.env, r), Events: evs, Output: []tailPiece{}}
	if out.Events == nil {
		out.Events = []run.Event{}
	}
	if !o.EventsOnly {
		var more bool
		out.Output, cur, more, err = tailLogs(f.env, r, o.Check, cur)
		if err != nil {
			return tailOutput{}, err
		}
		cut = cut || more
	}
	out.Cursor = cur
	out.Done = r.State.Terminal() && !cut
	return out, nil
}

// tailLogs reads the output from cursor c on, attempt after attempt, and
// returns it with the cursor after it; more reports that the byte budget
// ran out before the end.
func tailLogs(env *Env, r *run.Run, check string, c tailCursor) (out []tailPiece, next tailCursor, more bool, err error) {
	out = []tailPiece{}
	n := attemptCount(env, r)
	budget := int64(maxTailBytes)
	for c.Attempt <= n {
		kind, path := "agent", env.Layout.AgentLog(r.ID, c.Attempt)
		if check != "" {
			kind, path = "check", env.Layout.CheckLog(r.ID, c.Attempt, check)
		}
		// Nothing more is written to a log once a later attempt exists
		// or the run has ended.
		complete := c.Attempt < n || r.State.Terminal()
		b, eof, err := readSome(path, c.Offset, budget)
		if err != nil {
			return nil, c, false, err
		}
		if !complete || !eof {
			// A line still being written waits for its end; a line
			// longer than the budget comes in pieces.
			if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
				b = b[:i+1]
			} else if eof {
				b = nil
			}
		}
		if len(b) > 0 {
			out = append(out, tailPiece{Attempt: c.Attempt, Kind: kind, Name: check, Offset: c.Offset, Text: string(b)})
			c.Offset += int64(len(b))
			budget -= int64(len(b))
		}
		if !eof {
			return out, c, true, nil
		}
		if !complete || c.Attempt == n {
			return out, c, false, nil
		}
		c.Attempt, c.Offset = c.Attempt+1, 0
	}
	return out, c, false, nil
}

// readSome reads at most max bytes of path from off; eof reports that
// they reach the end the file had. A log that does not exist (yet) is
// empty.
func readSome(path string, off, max int64) (b []byte, eof bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("read log: %w", err)
	}
	if off >= st.Size() {
		return nil, true, nil
	}
	n := min(st.Size()-off, max)
	b = make([]byte, n)
	k, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, fmt.Errorf("read log: %w", err)
	}
	return b[:k], off+int64(k) == st.Size(), nil
}
