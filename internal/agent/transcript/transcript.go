// Package transcript is the format of an agent's per-attempt transcript
// (JSON lines, attempts/<n>/transcript.jsonl): what the built-in loop
// writes and what `agentrun logs` reads and renders.
package transcript

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/run"
)

// File is the per-attempt transcript's name (JSON lines).
const File = "transcript.jsonl"

// Record types of the transcript.
const (
	RecRunStart   = "run_start"
	RecAssistant  = "assistant"
	RecToolResult = "tool_result"
	RecNudge      = "nudge"
	RecCompaction = "compaction"
	RecWarning    = "warning"
	RecRunEnd     = "run_end"
)

// Record is one line of the transcript.
type Record struct {
	Type    string `json:"type"`
	Attempt int    `json:"attempt,omitempty"`
	Turn    int    `json:"turn,omitempty"`

	// run_start
	Model         string         `json:"model,omitempty"`
	Provider      string         `json:"provider,omitempty"`
	ContextWindow int            `json:"context_window,omitempty"`
	WindowSource  string         `json:"context_window_source,omitempty"`
	Settings      map[string]any `json:"settings,omitempty"`

	// assistant
	Content      string              `json:"content,omitempty"`
	Reasoning    string              `json:"reasoning,omitempty"`
	ToolCalls    []provider.ToolCall `json:"tool_calls,omitempty"`
	FinishReason string              `json:"finish_reason,omitempty"`
	Usage        *run.Usage          `json:"usage,omitempty"`

	// tool_result
	ToolCallID string `json:"tool_call_id,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Output     string `json:"output,omitempty"`
	Bytes      int    `json:"bytes,omitempty"`

	// nudge, warning
	Text string `json:"text,omitempty"`

	// compaction
	Method string `json:"method,omitempty"`
	Before int    `json:"before_tokens,omitempty"`
	After  int    `json:"after_tokens,omitempty"`

	// run_end
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Turns   int    `json:"turns,omitempty"`
}

// Render renders a transcript for people (`agentrun logs`).
// Unknown record types are skipped; a damaged line is shown as such.
func Render(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			fmt.Fprintf(bw, "(damaged transcript line)\n")
			continue
		}
		renderRecord(bw, rec)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read transcript: %w", err)
	}
	return bw.Flush()
}

func renderRecord(w io.Writer, r Record) {
	switch r.Type {
	case RecRunStart:
		fmt.Fprintf(w, "── attempt %d: %s via %s, context window %d tokens (%s)\n", r.Attempt, r.Model, r.Provider, r.ContextWindow, r.WindowSource)
	case RecAssistant:
		if r.Reasoning != "" {
			fmt.Fprintf(w, "[turn %d] thinking: %s\n", r.Turn, OneLine(r.Reasoning, 300))
		}
		if r.Content != "" {
			fmt.Fprintf(w, "[turn %d] assistant: %s\n", r.Turn, indent(r.Content))
		}
		for _, tc := range r.ToolCalls {
			fmt.Fprintf(w, "[turn %d] → %s %s\n", r.Turn, tc.Name, OneLine(tc.Arguments, 400))
		}
		if r.FinishReason == provider.FinishLength {
			fmt.Fprintf(w, "[turn %d] (reply cut at the output limit)\n", r.Turn)
		}
	case RecToolResult:
		status := "ok"
		if r.Kind != "" {
			status = r.Kind
		}
		fmt.Fprintf(w, "[turn %d] ← %s (%s, %d bytes)\n", r.Turn, r.Tool, status, r.Bytes)
		if out := strings.TrimRight(r.Output, "\n"); out != "" {
			fmt.Fprintf(w, "%s\n", indentAll(oneBlock(out, 40)))
		}
	case RecNudge:
		fmt.Fprintf(w, "[turn %d] nudge: %s\n", r.Turn, r.Text)
	case RecCompaction:
		fmt.Fprintf(w, "[turn %d] context compacted (%s): ~%d → ~%d tokens\n", r.Turn, r.Method, r.Before, r.After)
	case RecWarning:
		fmt.Fprintf(w, "warning: %s\n", r.Text)
	case RecRunEnd:
		fmt.Fprintf(w, "── attempt %d ended: %s after %d turns", r.Attempt, r.Status, r.Turns)
		if r.Usage != nil {
			fmt.Fprintf(w, "; tokens: %d prompt, %d completion", r.Usage.PromptTokens, r.Usage.CompletionTokens)
			if r.Usage.CachedTokens > 0 {
				fmt.Fprintf(w, ", %d cached", r.Usage.CachedTokens)
			}
		}
		fmt.Fprintln(w)
		if r.Message != "" {
			fmt.Fprintf(w, "%s\n", indentAll(r.Message))
		}
	}
}

// OneLine is s on one line (whitespace runs made one space), cut to n
// bytes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func oneBlock(s string, maxLines int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= maxLines {
		return s
	}
	return strings.Join(lines[:maxLines], "\n") + fmt.Sprintf("\n… (%d more lines)", len(lines)-maxLines)
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func indentAll(s string) string { return "    " + indent(s) }
