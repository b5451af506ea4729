package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/supervisor"
)

type logsOptions struct {
	ID      string
	Follow  bool
	Attempt int    // 0: every attempt
	Check   string // a check's output instead of the agent's
	Events  bool   // the event journal instead of output
	Setup   bool   // the setup command's output
	// Poll is how often -f looks for new output (default 100ms).
	Poll time.Duration
}

// checkName is what layout.CheckLog accepts as a check name; anything else
// could name a path outside the attempt directory.
var checkName = lazyre.New(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// Validate checks the flags and their combinations.
func (o *logsOptions) Validate() error {
	if o.Attempt < 0 {
		return catalog.Usage.New("--attempt %d: attempts are numbered from 1", o.Attempt)
	}
	if o.Check != "" && !checkName.MatchString(o.Check) {
		return catalog.Usage.New("--check %q is not a check name (letters, digits, '.', '-', '_')", o.Check)
	}
	if o.Setup && (o.Events || o.Check != "" || o.Attempt != 0) {
		return catalog.ConflictFlags.New("--setup shows the setup's output; it takes none of --events, --check and --attempt")
	}
	if o.Events && (o.Check != "" || o.Attempt != 0) {
		return catalog.ConflictFlags.New("--events shows the whole journal; it takes neither --check nor --attempt")
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	return nil
}

func (app *App) newLogsCmd() *cobra.Command {
	var o logsOptions
	c := &cobra.Command{
		Use:   "logs ID [-f] [--attempt N] [--check NAME] [--events]",
		Short: "Show a run's agent output, check output or event journal",
		Long: `Show a run's output: by default what the agent printed, attempt by attempt
(a built-in agent attempt is rendered from its transcript, except with -f
and --json, which show the raw agent output). With --check NAME,
that check's output; with --events, the run's event journal.

  -f, --follow     keep printing as the output grows, until the run ends
  --attempt N      only attempt N
  --check NAME     the output of check NAME (of every attempt, or of --attempt N)
  --events         the event journal (state changes, checks, egress, warnings)
  --setup          the output of the run's setup command (when this run made
                   its setup layer)

On a terminal, control characters in agent and check output are shown, not
interpreted; piped or redirected, the bytes are exactly what was written.
Under --json: one document {"id", "logs": [{"attempt", "kind", "name", "text",
"transcript"}]} (transcript: a built-in agent attempt's records) or {"id",
"events": [...]}; with -f, one JSON object per line instead, as submit
--follow --json prints them: {"type": "output", "attempt", "kind", "name",
"line"} (or an event with --events), then {"type": "end", ...} with the run as
submit --json shows it; an error is one {"error": {...}} line.
`,
		Args: exactArgs(1, "logs needs one run ID"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ID = args[0]
			if app.remote != nil {
				return app.remoteLogs(c.Context(), &o)
			}
			return runLogs(c.Context(), &o, app)
		},
	}
	c.Flags().BoolVarP(&o.Follow, "follow", "f", false, "follow the output until the run ends")
	c.Flags().IntVar(&o.Attempt, "attempt", 0, "only attempt `N`")
	c.Flags().StringVar(&o.Check, "check", "", "the output of check `NAME`")
	c.Flags().BoolVar(&o.Events, "events", false, "the event journal")
	c.Flags().BoolVar(&o.Setup, "setup", false, "the setup command's output")
	return c
}

// logPiece is one log in `logs --json`.
type logPiece struct {
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"` // agent | check | setup
	Name    string `json:"name,omitempty"`
	Text    string `json:"text"`
	// Transcript is a built-in agent attempt's transcript (what `logs`
	// shows people instead of Text).
	Transcript []transcript.Record `json:"transcript,omitempty"`
}

// The JSON-lines streams (logs -f --json, submit/resume --follow --json)
// hold journal events (run.Event, whose type is an event type), output
// lines (type "output"), and at the end the run (type "end") or an error
// line ({"error": ...}, no type).
const (
	lineOutput = "output"
	lineEnd    = "end"
)

// logLine is one line of agent or check output in a JSON-lines stream.
type logLine struct {
	Type    string `json:"type"` // lineOutput
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"` // agent | check
	Name    string `json:"name,omitempty"`
	Line    string `json:"line"`
}

func outputLine(attempt int, kind, name, line string) logLine {
	return logLine{Type: lineOutput, Attempt: attempt, Kind: kind, Name: name, Line: line}
}

// endLine is the last line of a JSON-lines stream: the run that ended, as
// submit --json shows it.
type endLine struct {
	Type string `json:"type"` // lineEnd
	submitOutput
}

func newEndLine(env *Env, r *run.Run) endLine {
	return endLine{Type: lineEnd, submitOutput: toSubmitOutput(env, r)}
}

func runLogs(ctx context.Context, o *logsOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, r, err := app.lookupRun(ctx, o.ID)
	if err != nil {
		return err
	}
	if o.Attempt > 0 && o.Attempt > attemptCount(env, r) && (!o.Follow || r.State.Terminal()) {
		return catalog.NoLog.New("run %s has %d attempts, not %d", r.ID, attemptCount(env, r), o.Attempt)
	}
	if o.Events {
		if o.Follow {
			return app.followEvents(ctx, o, env, r)
		}
		return app.printEvents(ctx, env, r)
	}
	if o.Follow {
		return app.followLogs(ctx, o, env, r)
	}
	return app.printLogs(o, env, r)
}

// attemptCount is how many attempts the run has: those recorded, or more
// if the supervisor has made the next attempt's directory already.
func attemptCount(env *Env, r *run.Run) int {
	n := len(r.Attempts)
	for {
		if _, err := os.Stat(env.Layout.AttemptDir(r.ID, n+1)); err != nil {
			return n
		}
		n++
	}
}

// logSource is one file shown by logs.
type logSource struct {
	attempt int
	kind    string
	name    string
	path    string
}

// sources lists, in order, the logs the options select that exist now.
func sources(o *logsOptions, env *Env, r *run.Run) []logSource {
	first, last := 1, attemptCount(env, r)
	if o.Attempt > 0 {
		first, last = o.Attempt, o.Attempt
	}
	var out []logSource
	if o.Setup {
		if p := env.Layout.SetupLog(r.ID); pathExists(p) {
			out = append(out, logSource{kind: "setup", path: p})
		}
		return out
	}
	for n := first; n <= last; n++ {
		s := logSource{attempt: n, kind: "agent", path: env.Layout.AgentLog(r.ID, n)}
		if o.Check != "" {
			s = logSource{attempt: n, kind: "check", name: o.Check, path: env.Layout.CheckLog(r.ID, n, o.Check)}
		}
		if _, err := os.Stat(s.path); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// allEmpty reports whether every source is an empty file (and there is
// no transcript to render instead).
func allEmpty(srcs []logSource) bool {
	for _, s := range srcs {
		if st, err := os.Stat(s.path); err != nil || st.Size() > 0 {
			return false
		}
		if s.kind == "agent" {
			if _, err := os.Stat(filepath.Join(filepath.Dir(s.path), transcript.File)); err == nil {
				return false
			}
		}
	}
	return true
}

func (s logSource) what() string {
	if s.kind == "setup" {
		return "setup command"
	}
	if s.kind == "check" {
		return "check " + s.name
	}
	return "agent"
}

func (s logSource) header() string {
	if s.kind == "check" {
		return fmt.Sprintf("==> attempt %d: check %s <==", s.attempt, s.name)
	}
	return fmt.Sprintf("==> attempt %d <==", s.attempt)
}

func (app *App) printLogs(o *logsOptions, env *Env, r *run.Run) error {
	srcs := sources(o, env, r)
	if len(srcs) == 0 {
		what := "agent output"
		if o.Check != "" {
			what = "output of check " + o.Check
		}
		if o.Setup {
			what = "setup output (it made no setup layer: it had none, or found it cached)"
		}
		if o.Check != "" || o.Setup || r.State.Terminal() {
			return catalog.NoLog.New("run %s (%s) has no %s", r.ID, r.State, what)
		}
		app.warn("run %s is %s and has no %s yet; follow it with 'agentrun logs -f %s'", r.ID, r.State, what, r.ID)
		if app.JSON {
			return writeJSON(app.Stdout, map[string]any{"id": r.ID, "logs": []logPiece{}})
		}
		return nil
	}
	if app.JSON {
		pieces := []logPiece{}
		for _, s := range srcs {
			b, err := os.ReadFile(s.path)
			if err != nil {
				return fmt.Errorf("read %s log: %w", s.kind, err)
			}
			p := logPiece{Attempt: s.attempt, Kind: s.kind, Name: s.name, Text: string(b)}
			if s.kind == "agent" {
				if p.Transcript, err = app.readTranscript(env.Layout.Transcript(r.ID, s.attempt)); err != nil {
					return err
				}
			}
			pieces = append(pieces, p)
		}
		return writeJSON(app.Stdout, map[string]any{"id": r.ID, "logs": pieces})
	}
	if allEmpty(srcs) {
		fmt.Fprintf(app.Stderr, "run %s: the %s printed nothing\n", r.ID, srcs[0].what())
		return nil
	}
	w, done := app.rawOut()
	for i, s := range srcs {
		if len(srcs) > 1 {
			if i > 0 {
				fmt.Fprintln(app.Stdout)
			}
			fmt.Fprintln(app.Stdout, paint(app.colour(), sgrDim, s.header()))
		}
		if err := app.printSource(w, env, r, s); err != nil {
			return err
		}
	}
	return done()
}

// readTranscript reads a built-in agent attempt's transcript records (nil
// when the attempt has none). A damaged line is left out, with a warning.
func (app *App) readTranscript(path string) ([]transcript.Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	defer f.Close()
	recs := []transcript.Record{}
	damaged := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec transcript.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			damaged++
			continue
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	if damaged > 0 {
		app.warn("%s: %d damaged lines left out", path, damaged)
	}
	return recs, nil
}

// printSource prints one log; an agent attempt with a transcript is
// rendered from it when a renderer is available.
func (app *App) printSource(w io.Writer, env *Env, r *run.Run, s logSource) error {
	if s.kind == "agent" {
		if f, err := os.Open(env.Layout.Transcript(r.ID, s.attempt)); err == nil {
			defer f.Close()
			if err := transcript.Render(f, w); err != nil {
				return fmt.Errorf("render transcript: %w", err)
			}
			return nil
		}
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("read %s log: %w", s.kind, err)
	}
	defer f.Close()
	cut, err := runner.CopyNotingCuts(w, f)
	if err != nil {
		return fmt.Errorf("print %s log: %w", s.kind, err)
	}
	if cut > 0 {
		fmt.Fprintf(app.Stderr, "run %s: attempt %d: the %s output was too long: %d bytes in its middle are not in the log (see the \"bytes cut\" line; each stream keeps its first and last %d MiB)\n",
			r.ID, s.attempt, s.what(), cut, runner.DefaultOutputCap/2>>20)
	}
	return nil
}

// follower polls one run: its state first, then whatever it selected, so
// that once the state is terminal the output read after it is complete.
type follower struct {
	app    *App
	env    *Env
	id     string
	poll   time.Duration
	warned bool
}

// refresh rereads the run and reconciles it (warning once if that fails).
func (f *follower) refresh(ctx context.Context) (*run.Run, error) {
	r, err := f.env.Store.Get(ctx, f.id)
	if err != nil {
		return nil, err
	}
	if r.State.Terminal() {
		return r, nil
	}
	nr, err := supervisor.Reconcile(ctx, f.env.runs(), r)
	if err != nil || nr == nil {
		if err != nil && !f.warned {
			f.warned = true
			f.app.warn("cannot check whether run %s is still alive: %v", r.ID, err)
		}
		return r, nil
	}
	return nr, nil
}

func (f *follower) sleep(ctx context.Context) error {
	t := time.NewTimer(f.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (app *App) followLogs(ctx context.Context, o *logsOptions, env *Env, r *run.Run) error {
	f := &follower{app: app, env: env, id: r.ID, poll: o.Poll}
	var (
		w       io.Writer
		done    = func() error { return nil }
		partial []byte // JSON mode: the unfinished last line of the current source
		cur     = 0
		offset  int64
		headed  = 0 // the source whose header was printed last
	)
	if !app.JSON {
		w, done = app.rawOut()
	}
	emit := func(s logSource, b []byte, final bool) error {
		if !app.JSON {
			_, err := w.Write(b)
			return err
		}
		partial = append(partial, b...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			if err := writeJSONLine(app.Stdout, outputLine(s.attempt, s.kind, s.name, string(partial[:i]))); err != nil {
				return err
			}
			partial = partial[i+1:]
		}
		if final && len(partial) > 0 {
			err := writeJSONLine(app.Stdout, outputLine(s.attempt, s.kind, s.name, string(partial)))
			partial = partial[:0]
			return err
		}
		return nil
	}
	for {
		cr, err := f.refresh(ctx)
		if err != nil {
			return err
		}
		srcs := sources(o, env, cr)
		for cur < len(srcs) {
			s := srcs[cur]
			more := cur < len(srcs)-1 // a later source exists: this one is complete
			if cur > headed && !app.JSON {
				headed = cur
				fmt.Fprintln(app.Stdout, paint(app.colour(), sgrDim, s.header()))
			}
			n, err := readFrom(s.path, offset, func(b []byte) error { return emit(s, b, false) })
			if err != nil {
				return err
			}
			offset += n
			if !more && !cr.State.Terminal() {
				break
			}
			if err := emit(s, nil, true); err != nil {
				return err
			}
			if !more {
				break
			}
			cur, offset = cur+1, 0
		}
		if cr.State.Terminal() {
			if err := done(); err != nil {
				return err
			}
			if app.JSON {
				return writeJSONLine(app.Stdout, newEndLine(env, cr))
			}
			app.endNote(cr)
			return nil
		}
		if err := f.sleep(ctx); err != nil {
			return err
		}
	}
}

// endNote tells a person following a run how it ended (stderr: stdout holds
// only the output).
func (app *App) endNote(r *run.Run) {
	msg := "run " + r.ID + " " + string(r.State)
	if r.Reason != "" {
		msg += " (" + string(r.Reason) + ")"
	}
	fmt.Fprintln(app.Stderr, msg)
}

// readFrom passes the bytes of path from offset to its current end to fn,
// and returns how many it passed. A file that does not exist yet has none.
func readFrom(path string, offset int64, fn func([]byte) error) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n += int64(k)
			if err := fn(buf[:k]); err != nil {
				return n, err
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read log: %w", err)
		}
	}
}

func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

func (app *App) printEvents(ctx context.Context, env *Env, r *run.Run) error {
	evs, err := env.Store.Events(ctx, r.ID, 0)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	if app.JSON {
		if evs == nil {
			evs = []run.Event{}
		}
		return writeJSON(app.Stdout, map[string]any{"id": r.ID, "events": evs})
	}
	var t table
	for _, e := range evs {
		t.add(eventCells(app.colour(), e)...)
	}
	return t.write(app.Stdout)
}

func (app *App) followEvents(ctx context.Context, o *logsOptions, env *Env, r *run.Run) error {
	f := &follower{app: app, env: env, id: r.ID, poll: o.Poll}
	var after int64
	for {
		cr, err := f.refresh(ctx)
		if err != nil {
			return err
		}
		evs, err := env.Store.Events(ctx, r.ID, after)
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		for _, e := range evs {
			after = e.Seq
			if app.JSON {
				err = writeJSONLine(app.Stdout, e)
			} else {
				// One row per event: followed output cannot be aligned
				// with rows not yet written.
				_, err = fmt.Fprintln(app.Stdout, strings.Join(eventCells(app.colour(), e), "  "))
			}
			if err != nil {
				return err
			}
		}
		if cr.State.Terminal() {
			if app.JSON {
				return writeJSONLine(app.Stdout, newEndLine(env, cr))
			}
			app.endNote(cr)
			return nil
		}
		if err := f.sleep(ctx); err != nil {
			return err
		}
	}
}

// eventCells is one journal entry for people: time, type, summary.
func eventCells(col bool, e run.Event) []string {
	var parts []string
	if e.Attempt > 0 {
		parts = append(parts, "#"+strconv.Itoa(e.Attempt))
	}
	if e.State != "" {
		s := paint(col, stateColour(e.State), string(e.State))
		if e.Reason != "" {
			s += " (" + string(e.Reason) + ")"
		}
		parts = append(parts, s)
	}
	if e.Message != "" {
		parts = append(parts, oneLine(e.Message, 100))
	}
	if len(e.Data) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, e.Data) == nil {
			parts = append(parts, paint(col, sgrDim, oneLine(buf.String(), 120)))
		}
	}
	return []string{e.Time.Local().Format("15:04:05.000"), oneLine(e.Type, 20), strings.Join(parts, " ")}
}

func pathExists(p string) bool { _, err := os.Stat(p); return err == nil }
