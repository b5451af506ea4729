package loop

import (
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		content, reasoning, finish string
		want                       replyKind
	}{
		{"All done: the tests pass.", "", provider.FinishStop, replyAnswer},
		{"Use {\"a\": 1} as config.", "", provider.FinishStop, replyAnswer},
		{"", "", provider.FinishStop, replyEmpty},
		{"  \n", "", provider.FinishOther, replyEmpty},
		{"", "hmm", provider.FinishStop, replyThinking},
		{"<think>only this", "", provider.FinishStop, replyThinking},
		{"partial", "", provider.FinishLength, replyTruncated},
		{"<tool_call>\n{\"name\": \"bash\"}", "", provider.FinishStop, replyTextCall},
		{"[TOOL_CALLS][{\"name\":\"bash\",\"arguments\":{}}]", "", provider.FinishStop, replyTextCall},
		{"{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"parameters\":{\"command\":\"ls\"}}}", "", provider.FinishStop, replyTextCall},
		{"<|tool_calls_begin|>", "", provider.FinishStop, replyTextCall},
	}
	for _, c := range cases {
		got := classify(&provider.Response{Message: provider.Message{Content: c.content, Reasoning: c.reasoning}, FinishReason: c.finish})
		if got != c.want {
			t.Errorf("%q: %s, want %s", c.content, got, c.want)
		}
	}
}

// FuzzClassify: model replies are untrusted text; classification never
// panics and always gives a known kind.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"", "<think>", "<tool_call>", "{\"name\":\"x\",\"arguments\":{}}", "{{{", "```json\n{}\n```"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, content, reasoning string) {
		switch classify(&provider.Response{Message: provider.Message{Content: content, Reasoning: reasoning}}) {
		case replyAnswer, replyEmpty, replyThinking, replyTextCall, replyTruncated:
		default:
			t.Fatal("unknown kind")
		}
	})
}
