package loop

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/tools"
	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/run"
)

// runCalls runs the tool calls of one assistant message, in order, and
// appends one tool result per call (every call id gets its answer, so the
// conversation stays valid for the next request or attempt).
func (st *attempt) runCalls(ctx context.Context, calls []provider.ToolCall) (reason run.Reason, msg string, progress bool, err error) {
	for _, tc := range calls {
		if reason != "" {
			why := "skipped: the run ended before this call"
			if reason == run.ReasonCancelled || reason == run.ReasonTimeout {
				why = "[interrupted: the run was stopped]"
			}
			st.addResult(tc, tools.Result{Kind: tools.KindFailed, Output: why})
			continue
		}
		if ctx.Err() != nil {
			reason, msg = ctxReason(ctx), "stopped during a tool call"
			st.addResult(tc, tools.Result{Kind: tools.KindFailed, Output: "[interrupted: the run was stopped]"})
			continue
		}
		var r tools.Result
		if strings.TrimSpace(tc.Name) == "" {
			r = tools.Result{Kind: kindMalformedCall, Output: "error: the tool call has no tool name; call one of the tools by name"}
		} else {
			r, err = tools.Call(ctx, st.env, tc.Name, tc.Arguments)
			if err != nil {
				if ctx.Err() != nil {
					reason, msg, err = ctxReason(ctx), "stopped during a tool call", nil
					st.addResult(tc, tools.Result{Kind: tools.KindFailed, Output: "[interrupted: the run was stopped]"})
					continue
				}
				return "", "", false, fmt.Errorf("tool %s: %w", tc.Name, err)
			}
		}
		r.Output, err = capResult(r.Output, st.bud.resultCap, st.env.SpillDir, &st.spillSeq)
		if err != nil {
			return "", "", false, err
		}
		st.addResult(tc, r)

		switch r.Kind {
		case kindMalformedCall, tools.KindMalformedArguments, tools.KindUnknownTool, tools.KindBadArguments:
			if st.fails.add(failKind(r.Kind)) {
				reason, msg = run.ReasonModelError, st.failMessage()
			}
		default:
			st.fails.success()
		}
		if len(r.Changed) > 0 {
			progress = true
		}
		key := fmt.Sprintf("%x", sha256.Sum256([]byte(tc.Name+"\x00"+r.Output)))
		if !st.seen[key] {
			st.seen[key] = true
			if r.Kind == tools.KindOK || r.Command != "" {
				progress = true
			}
		}
		if r.Command != "" { // a bash call (by any alias)
			switch {
			case r.ExitCode == 0:
				st.lastFail, st.failRuns = "", 0
			case r.Command == st.lastFail:
				st.failRuns++
			default:
				st.lastFail, st.failRuns = r.Command, 1
			}
			if st.failRuns >= StuckRepeats && reason == "" {
				reason, msg = run.ReasonStuck, fmt.Sprintf("the same failing command ran %d times in a row: %s", st.failRuns, transcript.OneLine(r.Command, 200))
			}
		} else {
			st.lastFail, st.failRuns = "", 0
		}
		if r.Finish && reason == "" {
			reason, msg = run.ReasonCompleted, r.Summary
		}
	}
	return reason, msg, progress, nil
}

const kindMalformedCall tools.Kind = "malformed_call"

func failKind(k tools.Kind) string {
	switch k {
	case kindMalformedCall:
		return failMalformedCall
	case tools.KindMalformedArguments:
		return failMalformedArgs
	case tools.KindUnknownTool:
		return failUnknownTool
	}
	return failBadArgs
}

func (st *attempt) addResult(tc provider.ToolCall, r tools.Result) {
	content := r.Output
	if content == "" {
		content = "(no output)"
	}
	st.msgs = append(st.msgs, provider.Message{Role: provider.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: content})
	st.tr.add(transcript.Record{Type: transcript.RecToolResult, Attempt: st.in.N, Turn: st.turn, ToolCallID: tc.ID, Tool: tc.Name, Kind: string(r.Kind), Output: clipRecord(content), Bytes: len(content)})
	line := summarize(tc, r)
	fmt.Fprintf(st.out, "turn %d: %s\n", st.turn, line)
	if st.in.Event != nil {
		ev := run.NewEvent(run.EventTool, line, map[string]any{"tool": tc.Name, "turn": st.turn, "kind": string(r.Kind), "ok": r.Kind == tools.KindOK})
		ev.Attempt = st.in.N
		st.in.Event(ev)
	}
}

// summarize is the one-line human summary of a call and its result.
func summarize(tc provider.ToolCall, r tools.Result) string {
	var b strings.Builder
	b.WriteString(tc.Name)
	switch {
	case r.Command != "":
		fmt.Fprintf(&b, " %s → exit %d", transcript.OneLine(r.Command, 120), r.ExitCode)
	case len(r.Changed) > 0:
		fmt.Fprintf(&b, " %s", strings.Join(r.Changed, ", "))
	case r.Finish:
		fmt.Fprintf(&b, ": %s", transcript.OneLine(r.Summary, 200))
	default:
		fmt.Fprintf(&b, " %s", transcript.OneLine(tc.Arguments, 120))
	}
	if r.Kind != tools.KindOK {
		fmt.Fprintf(&b, " [%s: %s]", r.Kind, transcript.OneLine(r.Output, 160))
	}
	return b.String()
}

// fitBudget makes the next request fit: trim old tool results, then
// compact. false means the conversation cannot be made to fit.
func (st *attempt) fitBudget(ctx context.Context) (bool, error) {
	a := st.a
	// The effective budget: the limit shrunk by how much the server's
	// token counts exceed the estimate.
	eff := st.bud
	eff.window = eff.reserve + int(float64(st.bud.limit())/st.scale)
	limit := eff.limit()
	soft := limit * 85 / 100
	before := estimate(a.system, st.defs, st.msgs)
	if before <= soft {
		return true, nil
	}
	if trimOldResults(a.system, st.defs, st.msgs, limit*70/100) {
		after := estimate(a.system, st.defs, st.msgs)
		st.tr.add(transcript.Record{Type: transcript.RecCompaction, Attempt: st.in.N, Turn: st.turn, Method: "trim_results", Before: before, After: after})
		fmt.Fprintf(st.out, "turn %d: trimmed old tool results (~%d → ~%d tokens)\n", st.turn, before, after)
		if after <= soft {
			return true, nil
		}
		before = after
	}
	if len(st.msgs) <= 2 {
		return before <= limit, nil
	}
	// Right after a compaction, do not compact again while the request
	// still fits: a summary near the soft limit would otherwise be
	// rewritten every turn.
	if st.compacted > 0 && len(st.msgs)-st.compacted < 4 && before <= limit {
		return true, nil
	}
	res, err := a.compact(ctx, st.msgs, eff, a.system, st.defs, st.in.Prompt)
	if err != nil {
		return false, err
	}
	for _, u := range res.usage {
		st.usage.PromptTokens += max(u.PromptTokens, 0)
		st.usage.CompletionTokens += max(u.CompletionTokens, 0)
		st.usage.CachedTokens += max(u.CachedTokens, 0)
	}
	st.msgs = res.msgs
	st.compacted = len(st.msgs)
	after := estimate(a.system, st.defs, st.msgs)
	st.tr.add(transcript.Record{Type: transcript.RecCompaction, Attempt: st.in.N, Turn: st.turn, Method: res.method, Before: before, After: after})
	fmt.Fprintf(st.out, "turn %d: compacted the conversation by %s (~%d → ~%d tokens)\n", st.turn, res.method, before, after)
	return after <= limit, nil
}
