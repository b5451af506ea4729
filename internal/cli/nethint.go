package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
)

// networkHint says, for a run whose attempt or check failed, whether the
// network is a likely cause: connections its allowlist denied (with the
// flag that would allow each), or, under --network none, output that
// reads like a failed connection. "" when there is nothing to say.
type networkHint struct {
	// Denied are the hosts the allowlist denied, Flags what would allow
	// them (telemetry a run never needs is left out).
	Denied []string `json:"denied,omitempty"`
	Flags  []string `json:"flags,omitempty"`
	// Unreachable are hosts the allowlist let through that this machine
	// could not reach: their name did not resolve, or no connection to
	// them was made.
	Unreachable []string `json:"unreachable,omitempty"`
	unresolved  bool     // some of them because their names did not resolve
	// Offline is set when a log of a run without network shows a failed
	// connection (name resolution, "network is unreachable").
	Offline string `json:"offline,omitempty"`
	Hint    string `json:"hint"`
}

// offlineSigns are what tools print when the network is not there.
var offlineSigns = []string{"network is unreachable", "Network is unreachable", "no such host", "Temporary failure in name resolution",
	"Could not resolve host", "getaddrinfo", "ENOTFOUND", "EAI_AGAIN", "Name or service not known", "dial tcp", "connection refused"}

// networkHint is the hint for r, nil when there is nothing to say. evs is
// the run's journal when the caller has read it (nil: read here if needed).
func (app *App) networkHint(ctx context.Context, env *Env, r *run.Run, evs []run.Event) *networkHint {
	failed := r.State == run.StateFailed && (r.Reason == run.ReasonChecksFailed || r.Reason == run.ReasonAgentFailed)
	if !failed {
		return nil
	}
	h := &networkHint{}
	if r.Sandbox.Network == "allowlist" {
		if evs == nil {
			var err error
			if evs, err = env.Store.Events(ctx, r.ID, 0); err != nil {
				return nil
			}
		}
		var recs []egress.Record
		for _, e := range evs {
			var rec egress.Record
			if e.Type == run.EventEgress && json.Unmarshal(e.Data, &rec) == nil && rec.Host != "" {
				recs = append(recs, rec)
			}
		}
		sum := egress.Summarize(recs)
		notNeeded(app.Deps.Agents, r, sum.Denied)
		for _, d := range sum.Denied {
			switch d.Code {
			case "not_needed":
				continue
			case egress.CodeResolve, egress.CodeUnresolved:
				h.Unreachable = append(h.Unreachable, hostPort(d.Host, d.Port))
				h.unresolved = true
				continue
			}
			h.Denied = append(h.Denied, hostPort(d.Host, d.Port))
			if d.Flag != "" && !slices.Contains(h.Flags, d.Flag) {
				h.Flags = append(h.Flags, d.Flag)
			}
		}
		for _, a := range sum.Allowed {
			if a.Errors > 0 && a.Errors == a.Count {
				h.Unreachable = append(h.Unreachable, hostPort(a.Host, a.Port))
			}
		}
		if len(h.Denied)+len(h.Unreachable) == 0 {
			return nil
		}
		h.Hint = app.allowlistHint(h, r.ID)
		return h
	}
	// No network: look for a failed connection in the last attempt's logs.
	a := r.LastAttempt()
	if a == nil {
		return nil
	}
	logs := []string{env.Layout.AgentLog(r.ID, a.N)}
	for _, c := range a.Checks {
		if !c.Passed {
			logs = append(logs, env.Layout.CheckLog(r.ID, a.N, c.Name))
		}
	}
	for _, p := range logs {
		tail := readTail(p, 64<<10)
		for _, sign := range offlineSigns {
			if i := bytes.Index(tail, []byte(sign)); i >= 0 {
				h.Offline = sign
				h.Hint = fmt.Sprintf("the run had no network (--network none) and its output says %q: give it what it needs with --allow HOST or a preset (--allow preset:goproxy, preset:npm, preset:pypi, preset:crates, preset:github), then see 'agentrun egress ID'", sign)
				return h
			}
		}
	}
	return nil
}

// allowlistHint is the hint of an allowlist run: the hosts denied and
// the flags that allow them, and the allowed hosts that this machine
// could not reach, saying, when it names a proxy, that a run submitted
// with it leaves a name only the proxy resolves to the proxy.
func (app *App) allowlistHint(h *networkHint, id string) string {
	var parts []string
	if len(h.Denied) > 0 {
		s := fmt.Sprintf("%d host(s) were denied by the allowlist (%s): see 'agentrun egress %s'", len(h.Denied), oneLine(strings.Join(h.Denied, ", "), 80), id)
		if len(h.Flags) > 0 {
			s += "; to allow them: " + strings.Join(h.Flags, " ")
		}
		parts = append(parts, s)
	}
	if len(h.Unreachable) > 0 {
		s := fmt.Sprintf("%d allowed host(s) could not be reached from this machine (%s)", len(h.Unreachable), oneLine(strings.Join(h.Unreachable, ", "), 80))
		if px := gateway.ProxiesOf(app.Getenv).Proxies; len(px) > 0 && h.unresolved {
			s += fmt.Sprintf(": their names did not resolve here; a run submitted with this machine's proxy exported leaves a name this machine cannot resolve to that proxy (%s); see 'agentrun egress %s'", px[0], id)
		} else {
			s += fmt.Sprintf(": their names did not resolve or they did not answer here; see 'agentrun egress %s'", id)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// readTail is the last n bytes of a file.
func readTail(path string, n int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-n, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, n))
	return b
}
