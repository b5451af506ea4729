package loop

import (
	"encoding/json"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/lazyre"
)

// replyKind classifies an assistant reply that carries no tool call.
type replyKind string

const (
	replyTruncated   replyKind = "truncated"
	replyEmpty       replyKind = "empty"
	replyThinking    replyKind = "thinking_only"
	replyTextCall    replyKind = "tool_call_as_text"
	replyAnswer      replyKind = "answer"
	nudgeTruncated             = "Your reply was cut off at the output limit. Continue with one tool call at a time and keep replies short."
	nudgeEmpty                 = "Your reply was empty. Use the tools to work on the task, or call finish with a summary when it is done."
	nudgeThinking              = "You only thought and neither replied nor called a tool. Act now: call a tool, or call finish with a summary when the task is done."
	nudgeTextCall              = "You wrote a tool call as text; it was not run. Call tools through the tool-calling interface (a structured function call), one JSON object of arguments each."
	nudgeStalledPref           = "No file has changed and no new output has appeared for "
	nudgeStalledSuff           = " turns. Change your approach (read the error again, try something different), or call finish with a summary if the task is done."
)

var textCallPatterns = []*lazyre.Regexp{
	lazyre.New(`(?i)<tool_call>`),
	lazyre.New(`(?i)<function=`),
	lazyre.New(`(?i)<\|?tool_calls?(_begin|_start)?\|?>`),
	lazyre.New(`\[TOOL_CALLS\]`),
	lazyre.New(`(?i)<invoke name=`),
	lazyre.New(`(?i)<\|python_tag\|>`),
}

var jsonObject = lazyre.New(`(?s)\{.*\}`)

// classify says what a reply without tool calls is.
func classify(resp *provider.Response) replyKind {
	content := strings.TrimSpace(resp.Message.Content)
	if resp.FinishReason == provider.FinishLength {
		return replyTruncated
	}
	if content == "" {
		if strings.TrimSpace(resp.Message.Reasoning) != "" {
			return replyThinking
		}
		return replyEmpty
	}
	if looksLikeTextCall(content) {
		return replyTextCall
	}
	// Some servers put everything in a think block and nothing after it.
	if stripThink(content) == "" {
		return replyThinking
	}
	return replyAnswer
}

func looksLikeTextCall(s string) bool {
	for _, re := range textCallPatterns {
		if re.MatchString(s) {
			return true
		}
	}
	// A JSON object (possibly fenced) naming a tool and its arguments.
	for _, m := range jsonObject.FindAllString(s, 4) {
		var v map[string]any
		if json.Unmarshal([]byte(m), &v) != nil {
			continue
		}
		if fn, ok := v["function"].(map[string]any); ok {
			v = fn
		}
		_, hasName := v["name"].(string)
		_, hasArgs := v["arguments"]
		_, hasParams := v["parameters"]
		if hasName && (hasArgs || hasParams) {
			return true
		}
	}
	return false
}

var thinkBlock = lazyre.New(`(?s)<think>.*?(</think>|$)`)

func stripThink(s string) string {
	return strings.TrimSpace(thinkBlock.ReplaceAllString(s, ""))
}

// failure kinds that count toward model_error.
const (
	failMalformedCall = "malformed_call"
	failMalformedArgs = "malformed_arguments"
	failUnknownTool   = "unknown_tool"
	failBadArgs       = "bad_arguments"
	failEmpty         = "empty_reply"
)

// Failure limits.
const (
	maxFailuresInARow = 3
	maxFailuresTotal  = 6
)

// failures counts model failures: a success resets both counts.
type failures struct {
	last  string
	row   int
	total int
}

// add records a failure and reports whether the limit is reached.
func (f *failures) add(kind string) bool {
	if kind == f.last {
		f.row++
	} else {
		f.last, f.row = kind, 1
	}
	f.total++
	return f.row >= maxFailuresInARow || f.total >= maxFailuresTotal
}

func (f *failures) success() { *f = failures{} }
