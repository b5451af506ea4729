package cli

// output.go holds what the read-side commands (list, status, logs, result,
// diff, clean, verdict, egress) share: looking a run up by a user-given id
// (validated, resolved, reconciled), warnings, colour, relative times and
// terminal-safe text.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// lookupRun turns a user-given id or prefix into the run as it is now. The
// store validates the prefix strictly (an id like ../../etc is an error,
// never a path), an unknown or ambiguous prefix is an error naming the
// candidates, and a run whose supervisor died is reconciled to interrupted.
func (app *App) lookupRun(ctx context.Context, arg string) (*Env, *run.Run, error) {
	env, r, err := app.readRun(ctx, arg)
	if err != nil {
		return nil, nil, err
	}
	return env, app.reconcile(ctx, env, r), nil
}

// readRun is lookupRun without the reconcile: the record as stored, for
// commands that reconcile (or act) on their own terms.
func (app *App) readRun(ctx context.Context, arg string) (*Env, *run.Run, error) {
	env, err := app.openEnv()
	if err != nil {
		return nil, nil, err
	}
	id, err := env.Store.Resolve(ctx, arg)
	if err != nil {
		return nil, nil, err
	}
	r, err := env.Store.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return env, r, nil
}

// lookupEnded is lookupRun for commands that need a run that has ended: a
// run still in progress is catalog.NotFinished, with fix (a format taking
// the run id) as its fix.
func (app *App) lookupEnded(ctx context.Context, arg, fix string) (*Env, *run.Run, error) {
	env, r, err := app.lookupRun(ctx, arg)
	if err != nil {
		return nil, nil, err
	}
	if !r.State.Terminal() {
		return nil, nil, catalog.NotFinished.New("run %s is %s", r.ID, r.State).WithFix(fix, r.ID)
	}
	return env, r, nil
}

// oneRunID is the RunE of a command whose one argument is a run id: it
// stores the id, validates the options and runs.
func oneRunID(id *string, validate func() error, run func(context.Context) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return catalog.Usage.New("give exactly one run id")
		}
		*id = args[0]
		if err := validate(); err != nil {
			return err
		}
		return run(cmd.Context())
	}
}

// stateLine is a run's state for people: coloured, with its reason and
// message.
func stateLine(col bool, r *run.Run) string {
	state := paint(col, stateColour(r.State), string(r.State))
	// No word twice: "cancelled", not "cancelled (cancelled): cancelled".
	if r.Reason != "" && string(r.Reason) != string(r.State) && r.Reason != run.ReasonCompleted {
		state += " (" + string(r.Reason) + ")"
	}
	if m := r.Message; m != "" && m != string(r.State) && m != string(r.Reason) {
		state += ": " + oneLine(m, 0)
	}
	return state
}

// changesLine is a diffstat summary: "3 files, +10 -2".
func changesLine(files, ins, del int) string {
	return fmt.Sprintf("%s, +%d -%d", plural(files, "file"), ins, del)
}

// plural is "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// reconcile asks the supervisor package whether an active run still has a
// live supervisor, and returns the run as it now is. A read must not fail
// because that check failed: the run is shown as read, with a warning, and
// stays active (so clean still refuses it).
func (app *App) reconcile(ctx context.Context, env *Env, r *run.Run) *run.Run {
	if r.State.Terminal() {
		return r
	}
	nr, err := supervisor.Reconcile(ctx, env.runs(), r)
	if err != nil {
		app.warn("cannot check whether run %s is still alive: %v", r.ID, err)
		return r
	}
	if nr == nil {
		return r
	}
	return nr
}

// warn writes a one-line note to stderr (never stdout: under --json stdout
// holds exactly one JSON document).
func (app *App) warn(format string, args ...any) {
	fmt.Fprintf(app.Stderr, "warning: "+format+"\n", args...)
}

// isTerminal reports whether w is a terminal (a character device). A
// false positive such as /dev/null is harmless: nobody reads the colour.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// colour reports whether human output may use colour: only on a terminal,
// never with NO_COLOR set (to anything) or TERM=dumb, never under --json.
func (app *App) colour() bool {
	if app.JSON || app.Getenv("NO_COLOR") != "" || app.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(app.Stdout)
}

// SGR colour codes.
const (
	sgrRed    = "31"
	sgrGreen  = "32"
	sgrYellow = "33"
	sgrCyan   = "36"
	sgrDim    = "2"
	sgrBold   = "1"
)

// paint wraps s in an SGR sequence when on is set.
func paint(on bool, sgr, s string) string {
	if !on || s == "" {
		return s
	}
	return "\x1b[" + sgr + "m" + s + "\x1b[0m"
}

// stateColour is the colour a state is shown in.
func stateColour(s run.State) string {
	switch s {
	case run.StateSucceeded:
		return sgrGreen
	case run.StateFailed:
		return sgrRed
	case run.StateCancelled, run.StateInterrupted:
		return sgrYellow
	}
	return sgrCyan
}

// ago renders the time from t to now for people: "just now", "42s ago",
// "3m ago", "5h ago", "2d ago"; a time in the future (clock skew) is
// "just now".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// humanDuration rounds d for people: 850ms, 4.2s, 1m3s, 2h5m.
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// runDuration is how long the run has taken so far (or took).
func runDuration(now time.Time, r *run.Run) (time.Duration, bool) {
	if r.StartedAt == nil {
		return 0, false
	}
	end := now
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	return end.Sub(*r.StartedAt), true
}

// oneLine makes untrusted text safe for one table cell or field: the first
// line only, control and bidi control characters shown as U+FFFD, at most max runes (with an
// ellipsis when cut; max <= 0 means no limit).
func oneLine(s string, max int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	s = strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		// Bidi controls reorder what a reviewer reads ("run\u202etxt.sh"
		// shows as "run" + "hs.txt").
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError {
			return '\uFFFD'
		}
		return r
	}, s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		rs := []rune(s)
		s = strings.TrimSpace(string(rs[:max-1])) + "…"
	}
	return s
}

// shortCommit abbreviates a commit id for people.
func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// tildePath shows a path under home as ~/...
func (app *App) tildePath(p string) string {
	home := app.Getenv("HOME")
	if home != "" && home != "/" && (p == home || strings.HasPrefix(p, home+"/")) {
		return "~" + p[len(home):]
	}
	return p
}

// ttyWriter neutralises terminal control sequences in bytes that an agent
// or a check wrote, before they reach a person's terminal: ESC, the other
// C0 controls except tab, newline and carriage return, DEL and the C1
// controls (U+0080..U+009F) are shown in caret/hex notation instead of
// being interpreted (an agent must not be able to retitle the window, move
// the cursor to hide lines, or answer-back into the shell). Output that is
// not a terminal is passed through verbatim.
type ttyWriter struct {
	w     io.Writer
	carry bool // the previous Write ended in 0xC2 (first byte of a C1 rune)
}

func (t *ttyWriter) Write(p []byte) (int, error) {
	var b strings.Builder
	b.Grow(len(p))
	i := 0
	if t.carry {
		t.carry = false
		if len(p) > 0 && p[0] >= 0x80 && p[0] <= 0x9f {
			fmt.Fprintf(&b, "<U+%04X>", rune(p[0]))
			i = 1
		} else {
			b.WriteByte(0xc2)
		}
	}
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\t' || c == '\n' || c == '\r':
			b.WriteByte(c)
		case c < 0x20:
			b.WriteByte('^')
			b.WriteByte(c + '@')
		case c == 0x7f:
			b.WriteString("^?")
		case c == 0xc2:
			if i+1 == len(p) {
				t.carry = true
				continue
			}
			if n := p[i+1]; n >= 0x80 && n <= 0x9f {
				fmt.Fprintf(&b, "<U+%04X>", rune(n))
				i++
				continue
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes a held-back byte (end of stream).
func (t *ttyWriter) flush() error {
	if !t.carry {
		return nil
	}
	t.carry = false
	_, err := t.w.Write([]byte{0xc2})
	return err
}

// rawOut is where agent-written bytes (agent and check output, patches)
// go: verbatim when stdout is not a terminal, neutralised when it is. Call
// done after the last write.
func (app *App) rawOut() (w io.Writer, done func() error) {
	if isTerminal(app.Stdout) {
		t := &ttyWriter{w: app.Stdout}
		return t, t.flush
	}
	return app.Stdout, func() error { return nil }
}

// exactArgs requires n positional arguments; anything else is a usage error.
func exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return catalog.Usage.New("%s (got %d arguments)", msg, len(args))
		}
		return nil
	}
}
