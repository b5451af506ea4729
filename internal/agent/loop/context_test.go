package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/fakemodel"
	"github.com/agentrun/agentrun/internal/agent/tools"
	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/run"
)

// Earlier messages never change from one request to the next: each request
// is the previous one, byte for byte, plus the new turn.
func TestPromptCacheStability(t *testing.T) {
	r := newRig(t,
		fakemodel.Reply{Reasoning: "look first", ToolCalls: []provider.ToolCall{call("list_dir", map[string]any{})}},
		calls(call("write_file", map[string]any{"path": "a.go", "content": "package a\n"}), call("read_file", map[string]any{"path": "a.go"})),
		fakemodel.Reply{Content: "", FinishReason: "length"},
		calls(call("bash", map[string]any{"command": "seq 1 100000"})),
		calls(call("grep", map[string]any{"pattern": "package"})),
		calls(call("finish", map[string]any{"summary": "done"})),
	)
	os.WriteFile(filepath.Join(r.ws, "README"), []byte("hi\n"), 0o644)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
	reqs := r.srv.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		prev, _ := decodeReq(t, reqs[i-1])
		cur, _ := decodeReq(t, reqs[i])
		if !bytes.Equal(prev.Tools, cur.Tools) {
			t.Fatalf("request %d: tools changed", i)
		}
		if len(cur.Messages) <= len(prev.Messages) {
			t.Fatalf("request %d does not extend request %d", i, i-1)
		}
		for j, m := range prev.Messages {
			if !bytes.Equal(m, cur.Messages[j]) {
				t.Fatalf("request %d message %d changed:\n%s\n%s", i, j, m, cur.Messages[j])
			}
		}
		// The serialized prefix itself is identical up to the new turn.
		pb, cb := reqs[i-1], reqs[i]
		cut := bytes.Index(pb, []byte(`],"tools"`))
		if cut < 0 || !bytes.Equal(pb[:cut], cb[:cut]) {
			t.Fatalf("request %d: byte prefix differs", i)
		}
	}
	// No clock in the system prompt or markers.
	_, msgs := decodeReq(t, reqs[5])
	date := regexp.MustCompile(`20\d\d-\d\d-\d\d|\d\d:\d\d:\d\d`)
	for _, m := range msgs {
		if date.MatchString(m.Content) {
			t.Fatalf("timestamp in message: %.200s", m.Content)
		}
	}
}

func TestReasoningSentBack(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			r := newRig(t,
				fakemodel.Reply{Reasoning: "plan: list then finish", ReasoningField: field, ToolCalls: []provider.ToolCall{call("list_dir", map[string]any{})}},
				calls(call("finish", map[string]any{"summary": "ok"})),
			)
			r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
			reqs := r.srv.Requests()
			w, msgs := decodeReq(t, reqs[1])
			got := msgs[2].ReasoningContent + msgs[2].Reasoning
			if msgs[2].Role != "assistant" || got != "plan: list then finish" {
				t.Fatalf("%+v", msgs[2])
			}
			var raw map[string]any
			json.Unmarshal(w.Messages[2], &raw)
			if _, ok := raw[field]; !ok {
				t.Fatalf("reasoning not sent back in %s: %s", field, w.Messages[2])
			}
		})
	}
}

func TestResultCapAndSpill(t *testing.T) {
	r := newRig(t,
		calls(call("bash", map[string]any{"command": "seq 1 200000"})),
		calls(call("finish", map[string]any{"summary": "ok"})),
	)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
	msgs := r.lastMessages()
	res := msgs[len(msgs)-1].Content
	b := newBudget(32768)
	if len(res) > b.resultCap+400 {
		t.Fatalf("result %d bytes, cap %d", len(res), b.resultCap)
	}
	if !strings.HasPrefix(res, "1\n2\n3\n") || !strings.Contains(res, "200000\n[exit code 0]") {
		t.Fatalf("head or tail missing: %.100s … %.100s", res, res[len(res)-100:])
	}
	m := regexp.MustCompile(`\[… (\d+) bytes omitted of (\d+) \(\d+ lines\)\. The whole output is in (agentrun-spill://tool-0001\.txt)`).FindStringSubmatch(res)
	if m == nil {
		t.Fatalf("marker missing in %.3000s", res)
	}
	// The model can read the spill back.
	env := &tools.Env{Runner: r.runner, WorkDir: r.ws, SpillDir: filepath.Join(r.runDir, "spill")}
	got, err := tools.Call(context.Background(), env, "read_file", `{"path":"`+m[3]+`","offset":150000,"limit":1}`)
	if err != nil || !strings.HasPrefix(got.Output, "150000\t150000\n") {
		t.Fatalf("%v %q", err, got.Output)
	}
}

// fillScript reads a big file several times to grow the conversation.
func bigReads(n int) []fakemodel.Reply {
	var s []fakemodel.Reply
	for i := 0; i < n; i++ {
		s = append(s, calls(call("read_file", map[string]any{"path": fmt.Sprintf("big%d.txt", i)})))
	}
	return s
}

func writeBig(t *testing.T, dir string, n, size int) {
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("file %d: %s\n", i, strings.Repeat("x", 70))
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("big%d.txt", i)), []byte(strings.Repeat(line, size/len(line))), 0o644)
	}
}

func TestTrimOldestToolResultsFirst(t *testing.T) {
	script := append(bigReads(10), calls(call("finish", map[string]any{"summary": "ok"})))
	r := newRig(t, script...)
	r.spec.ContextWindow = 16000 // limit 12000 tokens ≈ 36 KB; each result ≈ 4.8 KB
	writeBig(t, r.ws, 10, 4500)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
	msgs := r.lastMessages()
	var trimmed []int
	for i, m := range msgs {
		if m.Content == trimmedResult {
			trimmed = append(trimmed, i)
		}
	}
	if len(trimmed) == 0 {
		t.Fatal("nothing was trimmed")
	}
	// The oldest results went first; the newest are intact.
	if trimmed[0] != 3 || !strings.Contains(msgs[len(msgs)-1].Content, "file 9:") {
		t.Fatalf("trimmed %v", trimmed)
	}
	if msgs[1].Content != "task" {
		t.Fatal("first user message changed")
	}
	if count(r.transcript(1), transcript.RecCompaction) == 0 {
		t.Fatal("trim not recorded")
	}
}

const goodSummary = "## Task\nAdd a test.\n## Done so far\nRead every big file and found the parser in big3.txt.\n## Files\nNone changed yet.\n## Findings\nThe parser lives in big3.txt; tests run with go test ./....\n## Next steps\nWrite parser_test.go and run go test.\n"

func compactingServer(t *testing.T, summaries ...string) (*fakemodel.Server, *[]string) {
	var seen []string
	// Large write_file arguments grow the part trimming cannot touch.
	var script []fakemodel.Reply
	for i := 0; i < 12; i++ {
		script = append(script, calls(call("write_file", map[string]any{"path": fmt.Sprintf("gen%d.txt", i), "content": strings.Repeat(fmt.Sprintf("line %d of generated data\n", i), 100)})))
	}
	script = append(script, calls(call("finish", map[string]any{"summary": "ok"})))
	i := 0
	srv := fakemodel.NewFunc(t, "test-model", func(n int, body []byte) fakemodel.Reply {
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
			Tools    []any                            `json:"tools"`
		}
		json.Unmarshal(body, &req)
		if req.Messages[0].Content == compactSystem {
			seen = append(seen, req.Messages[1].Content)
			s := summaries[0]
			if len(summaries) > 1 {
				summaries = summaries[1:]
			}
			return text(s)
		}
		rep := script[min(i, len(script)-1)]
		i++
		return rep
	})
	return srv, &seen
}

func TestCompaction(t *testing.T) {
	r := newRig(t)
	var prompts *[]string
	r.srv, prompts = compactingServer(t, goodSummary)
	r.spec.BaseURL, r.spec.ContextWindow = r.srv.URL, 8000 // limit 6000 tokens ≈ 18 KB
	writeBig(t, r.ws, 12, 4500)
	task := "Add a unit test for the parser"
	r.expect(r.run(context.Background(), task), run.ReasonCompleted)
	if len(*prompts) == 0 {
		t.Fatal("no compaction happened")
	}
	p := (*prompts)[0]
	// Transcript delimited, instruction restated after it.
	ti, te, ki := strings.Index(p, "<transcript>"), strings.Index(p, "</transcript>"), strings.LastIndex(p, "<task>\n"+task)
	if ti < 0 || te < ti || ki < te {
		t.Fatalf("compaction prompt shape wrong:\n%.500s", p)
	}
	var after []wireMsg
	for _, body := range r.srv.Requests() {
		_, m := decodeReq(t, body)
		if len(m) > 2 && strings.HasPrefix(m[2].Content, compactedPrefix) {
			after = m
		}
	}
	if after == nil {
		t.Fatal("no request continued from the summary")
	}
	if after[1].Content != task || !strings.Contains(after[2].Content, "## Next steps") {
		t.Fatalf("first message not kept whole or summary missing: %+v", after[:3])
	}
	var methods []string
	for _, rec := range r.transcript(1) {
		if rec.Type == transcript.RecCompaction {
			methods = append(methods, rec.Method)
		}
	}
	if !strings.Contains(strings.Join(methods, ","), "summary") {
		t.Fatalf("methods %v", methods)
	}
}

func TestCompactionGateRetryAndFallback(t *testing.T) {
	// First summary lacks sections: one retry, which passes.
	r := newRig(t)
	var prompts *[]string
	r.srv, prompts = compactingServer(t, "short", goodSummary)
	r.spec.BaseURL, r.spec.ContextWindow = r.srv.URL, 8000
	writeBig(t, r.ws, 12, 4500)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
	if len(*prompts) < 2 || !strings.Contains((*prompts)[1], "was rejected") {
		t.Fatalf("no retry with the reason: %d prompts", len(*prompts))
	}

	// Both summaries fail the gate: the trim fallback keeps the newest turns.
	r2 := newRig(t)
	r2.srv, _ = compactingServer(t, "## Task\nonly this")
	r2.spec.BaseURL, r2.spec.ContextWindow = r2.srv.URL, 8000
	writeBig(t, r2.ws, 12, 4500)
	r2.expect(r2.run(context.Background(), "task"), run.ReasonCompleted)
	found := false
	for _, rec := range r2.transcript(1) {
		found = found || (rec.Type == transcript.RecCompaction && rec.Method == "trim")
	}
	if !found {
		t.Fatal("no trim fallback")
	}
	msgs := r2.lastMessages()
	if len(msgs) < 4 || msgs[1].Content != "task" || msgs[2].Content != trimmedPrefix || msgs[3].Role != "assistant" {
		t.Fatalf("fallback shape: %+v", msgs)
	}
}

func TestConversationContinuesNextAttempt(t *testing.T) {
	r := newRig(t,
		calls(call("write_file", map[string]any{"path": "a.txt", "content": "1"})),
		calls(call("finish", map[string]any{"summary": "first"})),
		calls(call("write_file", map[string]any{"path": "a.txt", "content": "2"})),
		calls(call("finish", map[string]any{"summary": "second"})),
	)
	r.expect(r.run(context.Background(), "Make the check pass"), run.ReasonCompleted)
	first := r.srv.Requests()
	_, firstLast := decodeReq(t, first[len(first)-1])
	out := r.run(context.Background(), "The check unit failed:\nexpected 2")
	r.expect(out, run.ReasonCompleted)
	if out.Message != "second" {
		t.Fatal(out.Message)
	}
	reqs := r.srv.Requests()
	_, m := decodeReq(t, reqs[2])
	// system, task, assistant, tool, assistant(finish), tool, new prompt
	if len(m) != len(firstLast)+3 || m[1].Content != "Make the check pass" || m[len(m)-1].Content != "The check unit failed:\nexpected 2" {
		t.Fatalf("%d messages: %+v", len(m), m)
	}
	if count(r.transcript(2), transcript.RecRunStart) != 1 {
		t.Fatal("attempt 2 transcript")
	}
}

func TestServerContextOverflow(t *testing.T) {
	overflow := fakemodel.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}}`}
	// Once: the loop assumes more tokens and asks again.
	r := newRig(t, overflow, calls(call("finish", map[string]any{"summary": "ok"})))
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
	if count(r.transcript(1), transcript.RecWarning) != 1 {
		t.Fatal("no warning recorded")
	}
	// Again and again: context_exhausted, not an endless loop.
	r2 := newRig(t, overflow, overflow, overflow, overflow, overflow)
	out := r2.run(context.Background(), "task")
	r2.expect(out, run.ReasonContextExhausted)
	if len(r2.srv.Requests()) != 4 {
		t.Fatalf("%d requests", len(r2.srv.Requests()))
	}
}

// Reported prompt tokens larger than the estimate shrink the budget.
func TestUsageCalibratesBudget(t *testing.T) {
	huge := &provider.Usage{PromptTokens: 30000, CompletionTokens: 5}
	script := []fakemodel.Reply{}
	for i := 0; i < 4; i++ {
		script = append(script, fakemodel.Reply{ToolCalls: []provider.ToolCall{call("read_file", map[string]any{"path": fmt.Sprintf("big%d.txt", i)})}, Usage: huge})
	}
	script = append(script, calls(call("finish", map[string]any{"summary": "ok"})))
	r := newRig(t, script...)
	writeBig(t, r.ws, 4, 3000)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
	trimmed := 0
	for _, m := range r.lastMessages() {
		if m.Content == trimmedResult {
			trimmed++
		}
	}
	if trimmed == 0 {
		t.Fatal("the server's token counts did not shrink the budget")
	}
}

// A compaction in a later attempt keeps what failed last time.
func TestCompactionKeepsLatestInstruction(t *testing.T) {
	r := newRig(t)
	var prompts *[]string
	r.srv, prompts = compactingServer(t, goodSummary)
	r.spec.BaseURL, r.spec.ContextWindow = r.srv.URL, 8000
	// Attempt 1 ends at once; attempt 2 grows until compaction.
	os.WriteFile(filepath.Join(r.runDir, ConversationFile), []byte(`{"version":1,"messages":[{"role":"user","content":"the task"},{"role":"assistant","content":"done"}]}`), 0o644)
	r.attempt = 1
	latest := "The check unit failed: expected 2"
	r.expect(r.run(context.Background(), latest), run.ReasonCompleted)
	if len(*prompts) == 0 || !strings.Contains((*prompts)[0], "The latest instruction, given after earlier work:\n"+latest) {
		t.Fatal("latest instruction not restated")
	}
	for _, body := range r.srv.Requests() {
		_, m := decodeReq(t, body)
		if len(m) > 3 && strings.HasPrefix(m[2].Content, compactedPrefix) {
			if m[1].Content != "the task" || m[3].Content != latest {
				t.Fatalf("after compaction: %+v", m[:4])
			}
			return
		}
	}
	t.Fatal("no compacted request")
}
