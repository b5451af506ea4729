package bench

import (
	"bufio"
	"encoding/json"
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// runStatus is what an ended run says of the bench status before any
// scoring: ok when its result is to be judged, else the status it gets
// (failed: the agent's doing; error: the machinery's).
func runStatus(r *run.Run) (st Status, judge bool) {
	switch {
	case r.State == run.StateSucceeded:
		return "", true
	case r.State == run.StateCancelled, r.State == run.StateInterrupted:
		return StatusError, false
	}
	switch r.Reason {
	case run.ReasonSandboxError, run.ReasonInternal, run.ReasonExportFailed, run.ReasonCancelled, run.ReasonInterrupted:
		return StatusError, false
	}
	return StatusFailed, false
}

// collect fills res with what the ended run r, its journal evs and its
// transcripts (under l) say: attempts, turns, tokens, cost, times, the
// sandbox's overhead and the harness's failures.
func collect(res *Result, r *run.Run, evs []run.Event, l layout.Layout) {
	res.RunID, res.RunStatus, res.RunReason = r.ID, r.State, r.Reason
	res.Attempts = len(r.Attempts)
	if r.Commit != "" {
		res.Branch, res.Commit = r.Branch, r.Commit
	}
	if u := r.Usage; u != nil {
		res.Turns = u.Turns
		res.Tokens = Tokens{Prompt: u.PromptTokens, Completion: u.CompletionTokens, Cached: u.CachedTokens, Total: u.Total()}
		res.CostUSD = u.CostUSD
	}
	if r.StartedAt != nil {
		res.QueueMS = r.StartedAt.Sub(r.CreatedAt).Milliseconds()
		if r.FinishedAt != nil {
			res.WallMS = r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
		}
	}
	res.Overhead = overhead(evs)
	for _, a := range r.Attempts {
		switch a.Outcome {
		case run.ReasonStalled:
			res.Harness.Stalled++
		case run.ReasonStuck:
			res.Harness.Stuck++
		case run.ReasonMaxTurns:
			res.Harness.MaxTurns++
		case run.ReasonContextExhausted:
			res.Harness.ContextExhausted++
		case run.ReasonModelError:
			res.Harness.ModelError++
		case run.ReasonTimeout:
			res.Harness.Timeout++
		}
		res.Harness.Nudges += nudges(l.Transcript(r.ID, a.N))
	}
}

// overhead reads the sandbox's and the export's times from the journal
// (the first sandbox start: a run has one sandbox for all its attempts).
func overhead(evs []run.Event) Overhead {
	var o Overhead
	ms := func(s string) int64 {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0
		}
		return d.Milliseconds()
	}
	started := false
	for _, e := range evs {
		var d map[string]any
		if len(e.Data) == 0 || json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		str := func(k string) string { s, _ := d[k].(string); return s }
		switch {
		case e.Type == run.EventSandbox && !started && str("start_time") != "":
			started = true
			o.WorkspaceMS, o.SandboxStartMS = ms(str("workspace_time")), ms(str("start_time"))
		case e.Type == run.EventExport:
			o.ScanMS, o.ExportMS = ms(str("scan_time")), ms(str("export_time"))
		}
	}
	return o
}

// nudges counts the nudge records of the transcript at path (none when
// there is no transcript: an agent other than the built-in one).
func nudges(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		var rec struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Type == transcript.RecNudge {
			n++
		}
	}
	return n
}
