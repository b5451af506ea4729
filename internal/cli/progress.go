package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// progress shows, on stderr, where a run being waited for is: its phase,
// the time spent in it, the attempt and check. On a terminal it is one
// line redrawn in place; piped, one line per phase. It reads the run's
// journal, so it says only what the supervisor has recorded.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	// phase is the current phase's text and since when.
	phase  string
	since  time.Time
	drawn  bool // a line is on the terminal (to be cleared)
	last   time.Time
	maxAtt int
	// files counts what the workspace being made holds, against the
	// base commit's files, while the run prepares (nil: not counted).
	files     *fileCount
	lastCount time.Time
	filled    bool // the workspace is made: stop counting
}

// fileCount is the files written into a workspace being made, and the
// number the base commit has.
type fileCount struct {
	dir string
	// overlay says how an overlay workspace is being made ("" for a
	// copy): its upper layer, dir, starts empty, so its count would say 0.
	overlay func() string
	repo    string
	base    string
	total   chan int // the base commit's file count, once known
	asked   bool     // (the count of base's files has started)
	n       int
	known   bool
	done    int
}

// newFileCount counts the files written into dir against base's.
func newFileCount(repo, base, dir string) *fileCount {
	return &fileCount{dir: dir, repo: repo, base: base, total: make(chan int, 1)}
}

// countBase counts base's files in the background (git ls-tree in the
// user's repository, never in the workspace). It starts when the count is
// first shown, not with the run: most workspaces are made before then,
// and the run's start has the processor to itself.
func (fc *fileCount) countBase() {
	fc.asked = true
	go func() {
		out, err := exec.Command("git", "-C", fc.repo, "ls-tree", "-r", "-z", "--name-only", fc.base).Output()
		if err != nil {
			fc.total <- 0
			return
		}
		fc.total <- bytes.Count(out, []byte{0})
	}()
}

// count walks the workspace (not following links, skipping .git) and
// says "N of M files", or "" while nothing is known; for an overlay, what
// its overlay func says.
func (fc *fileCount) count() string {
	if fc.overlay != nil {
		if s := fc.overlay(); s != "" {
			return s
		}
	}
	if !fc.asked {
		fc.countBase()
	}
	if !fc.known {
		select {
		case fc.n = <-fc.total:
			fc.known = true
		default:
		}
	}
	done := 0
	_ = filepath.WalkDir(fc.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			done++
		}
		return nil
	})
	fc.done = done
	if fc.known && fc.n > 0 {
		return fmt.Sprintf("%d of %d files", min(done, fc.n), fc.n)
	}
	if done > 0 {
		return fmt.Sprintf("%d files", done)
	}
	return ""
}

func newProgress(w io.Writer, tty bool, maxAttempts int, now time.Time) *progress {
	return &progress{w: w, tty: tty, start: now, since: now, maxAtt: maxAttempts}
}

// event updates the phase from one journal event.
func (p *progress) event(e run.Event, now time.Time) {
	text := ""
	switch e.Type {
	case run.EventSubmitted:
		text = "queued, waiting for a free slot"
	case run.EventState:
		switch e.State {
		case run.StateQueued:
			text = "queued, waiting for a free slot"
		case run.StatePreparing:
			text = "preparing: making the workspace, starting the sandbox"
		case run.StateChecking:
			text = fmt.Sprintf("attempt %d: running the checks", e.Attempt)
			if e.Attempt == 0 {
				text = "running the checks"
			}
		case run.StateExporting:
			text = "exporting the changes"
		}
	case run.EventSandbox:
		p.filled = true
		if strings.HasPrefix(p.phase, "preparing") {
			p.phase = "preparing: the sandbox is up"
		}
		var d struct {
			Backend, WorkspaceTime, StartTime string
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Backend != "" {
			var x struct {
				WS    string `json:"workspace_time"`
				Start string `json:"start_time"`
			}
			_ = json.Unmarshal(e.Data, &x)
			p.line(now, fmt.Sprintf("sandbox started (%s): workspace %s, sandbox %s", d.Backend, roundDur(x.WS), roundDur(x.Start)))
		}
	case run.EventAttempt:
		text = fmt.Sprintf("attempt %d of %d: the agent is working", e.Attempt, max(p.maxAtt, e.Attempt))
	case run.EventAgentExit:
		p.line(now, e.Message)
	case run.EventWarning:
		p.line(now, "warning: "+e.Message)
	case run.EventResume:
		var d struct {
			ExportOnly bool `json:"export_only"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.ExportOnly {
			p.line(now, e.Message)
		}
	case run.EventCheck:
		p.line(now, e.Message)
	case run.EventSetup:
		var d struct{ Kind string }
		_ = json.Unmarshal(e.Data, &d)
		if d.Kind == "started" {
			p.filled = true // (what is counted now is the setup's, not the workspace's)
			text = "preparing: running the setup command (once for this commit)"
		} else {
			p.line(now, e.Message)
		}
	case run.EventGateway:
		var d struct{ Kind string }
		if json.Unmarshal(e.Data, &d) == nil {
			switch d.Kind {
			case "capacity_wait", "budget_exceeded", "upstream_error", "proxy", "certificates":
				p.line(now, "model: "+e.Message)
			case "model_failing":
				p.line(now, "model: "+e.Message+"; ending the attempt")
			}
		}
	}
	if text != "" && text != p.phase {
		p.phase, p.since = text, now
		p.draw(now, true)
	}
}

// progressLineMax bounds a kept progress line, in runes.
const progressLineMax = 400

// line prints a finished step (kept on the screen) and redraws the phase.
func (p *progress) line(now time.Time, msg string) {
	p.clear()
	// Kept whole: a line ends with its newline, so a terminal may wrap it
	// (only the phase is redrawn), and its end is often the point (which
	// key, which path). Bounded against a runaway message.
	fmt.Fprintf(p.w, "%s %s\n", stamp(now.Sub(p.start)), oneLine(msg, progressLineMax))
	p.draw(now, false)
}

// tick redraws the phase with its elapsed time (terminal only); while
// the workspace is made, with the files written so far (on a terminal
// every half second; piped, a line every 10 s).
func (p *progress) tick(now time.Time) {
	if p.files != nil && !p.filled && strings.HasPrefix(p.phase, "preparing") {
		every := 500 * time.Millisecond
		if !p.tty {
			every = 10 * time.Second
		}
		if now.Sub(p.lastCount) >= every && now.Sub(p.since) >= every {
			p.lastCount = now
			if c := p.files.count(); c != "" {
				p.phase = "preparing: making the workspace, " + c
				p.draw(now, true)
			}
		}
	}
	if p.tty && now.Sub(p.last) >= 200*time.Millisecond {
		p.draw(now, false)
	}
}

func (p *progress) draw(now time.Time, changed bool) {
	if p.phase == "" {
		return
	}
	if !p.tty {
		if changed {
			fmt.Fprintf(p.w, "%s %s\n", stamp(now.Sub(p.start)), p.phase)
		}
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s %s (%s)", stamp(now.Sub(p.start)), p.phase, humanDuration(now.Sub(p.since).Round(time.Second)))
	p.drawn, p.last = true, now
}

func (p *progress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// done ends the progress display.
func (p *progress) done() { p.clear() }

// stamp is the elapsed time since the wait began, as [m:ss].
func stamp(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("[%d:%02d]", s/60, s%60)
}

func roundDur(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

// phaseTimes is each phase's duration from a run's journal: workspace,
// sandbox start, each attempt, each check, export.
func phaseTimes(evs []run.Event) string {
	var parts []string
	started := map[int]time.Time{}
	for _, e := range evs {
		var d map[string]any
		_ = json.Unmarshal(e.Data, &d)
		str := func(k string) string { s, _ := d[k].(string); return s }
		switch e.Type {
		case run.EventSandbox:
			if ws := str("workspace_time"); ws != "" {
				parts = append(parts, "workspace "+roundDur(ws), "sandbox "+roundDur(str("start_time")))
			}
		case run.EventAttempt:
			started[e.Attempt] = e.Time
		case run.EventAgentExit:
			if t0, ok := started[e.Attempt]; ok {
				parts = append(parts, fmt.Sprintf("attempt %d %s", e.Attempt, roundDur(e.Time.Sub(t0).String())))
			}
		case run.EventCheck:
			if dur := str("duration"); dur != "" {
				parts = append(parts, fmt.Sprintf("check %s %s", str("name"), roundDur(dur)))
			}
		case run.EventExport:
			if x := str("export_time"); x != "" {
				parts = append(parts, "export "+roundDur(x))
			}
		}
	}
	return strings.Join(parts, ", ")
}
