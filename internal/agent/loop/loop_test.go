package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/fakemodel"
	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

func TestWriteThenFinish(t *testing.T) {
	r := newRig(t,
		calls(call("write_file", map[string]any{"path": "hello.txt", "content": "hi\n"})),
		calls(call("finish", map[string]any{"summary": "wrote hello.txt"})),
	)
	out := r.run(context.Background(), "Create hello.txt")
	r.expect(out, run.ReasonCompleted)
	if out.Message != "wrote hello.txt" {
		t.Fatalf("message %q", out.Message)
	}
	if b, _ := os.ReadFile(filepath.Join(r.ws, "hello.txt")); string(b) != "hi\n" {
		t.Fatalf("file %q", b)
	}
	if out.Usage == nil || out.Usage.Turns != 2 || out.Usage.PromptTokens <= 0 || out.Usage.CompletionTokens != 20 {
		t.Fatalf("usage %+v", out.Usage)
	}
	recs := r.transcript(1)
	if recs[0].Type != transcript.RecRunStart || recs[0].Model != "test-model" || recs[0].Provider != "openai" || recs[0].ContextWindow != 32768 {
		t.Fatalf("run_start %+v", recs[0])
	}
	if count(recs, transcript.RecAssistant) != 2 || count(recs, transcript.RecToolResult) != 2 || recs[len(recs)-1].Type != transcript.RecRunEnd || recs[len(recs)-1].Status != "completed" {
		t.Fatalf("transcript %+v", recs)
	}
	if len(r.events) != 2 || r.events[0].Type != run.EventTool || !strings.Contains(r.events[0].Message, "write_file hello.txt") {
		t.Fatalf("events %+v", r.events)
	}
	if !strings.Contains(r.out.String(), "turn 1: write_file hello.txt") {
		t.Fatalf("output:\n%s", r.out.String())
	}
	if _, err := os.Stat(filepath.Join(r.runDir, ConversationFile)); err != nil {
		t.Fatal(err)
	}
}

func TestAnswerEndsRun(t *testing.T) {
	r := newRig(t, text("The function already handles that case; nothing to change."))
	out := r.run(context.Background(), "Check X")
	r.expect(out, run.ReasonCompleted)
	if !strings.Contains(out.Message, "nothing to change") {
		t.Fatal(out.Message)
	}
}

// Each reply without a tool call that is not an answer gets a one-line nudge.
func TestNudges(t *testing.T) {
	cases := []struct {
		name  string
		reply fakemodel.Reply
		nudge string
	}{
		{"truncated", fakemodel.Reply{Content: "Let me write a very long", FinishReason: "length"}, nudgeTruncated},
		{"empty", fakemodel.Reply{}, nudgeEmpty},
		{"thinking only", fakemodel.Reply{Reasoning: "I should look at the files"}, nudgeThinking},
		{"think tags only", fakemodel.Reply{Content: "<think>plan the change</think>"}, nudgeThinking},
		{"tool_call tag", text(`<tool_call>{"name":"list_dir","arguments":{}}</tool_call>`), nudgeTextCall},
		{"function tag", text("<function=bash>\n<parameter=command>ls</parameter>\n</function>"), nudgeTextCall},
		{"json call", text("```json\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n```"), nudgeTextCall},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.reply, calls(call("finish", map[string]any{"summary": "ok"})))
			r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
			msgs := r.lastMessages()
			last := msgs[len(msgs)-1]
			if last.Role != "user" || last.Content != c.nudge {
				t.Fatalf("last message %+v, want nudge %q", last, c.nudge)
			}
			if strings.Contains(c.nudge, "\n") {
				t.Fatal("a nudge is one line")
			}
			if count(r.transcript(1), transcript.RecNudge) != 1 {
				t.Fatal("nudge not in transcript")
			}
		})
	}
}

func TestFailuresInARowEndRun(t *testing.T) {
	bad := calls(call("read_file", map[string]any{"offset": 1})) // path missing
	r := newRig(t, bad, bad, bad, calls(call("finish", map[string]any{"summary": "x"})))
	out := r.run(context.Background(), "task")
	r.expect(out, run.ReasonModelError)
	if len(r.srv.Requests()) != 3 || !strings.Contains(out.Message, "bad_arguments") {
		t.Fatalf("%d requests, %s", len(r.srv.Requests()), out.Message)
	}
	// The model saw what to fix.
	msgs := r.lastMessages()
	if !strings.Contains(msgs[len(msgs)-1].Content, "path is missing") {
		t.Fatalf("%+v", msgs[len(msgs)-1])
	}
}

func TestFailuresInTotalEndRun(t *testing.T) {
	// Alternating kinds: never 3 in a row, 6 in total.
	r := newRig(t,
		calls(call("read_file", map[string]any{})),               // bad arguments
		calls(call("nope", map[string]any{})),                    // unknown tool
		calls(call("read_file", `{"path": "a"`)),                 // malformed arguments
		fakemodel.Reply{},                                        // empty
		calls(call("", map[string]any{})),                        // malformed call
		calls(call("list_dir", `{"recursive": "sometimes"}`)),    // bad arguments
		calls(call("finish", map[string]any{"summary": "late"})), // never reached
	)
	out := r.run(context.Background(), "task")
	r.expect(out, run.ReasonModelError)
	if len(r.srv.Requests()) != 6 {
		t.Fatalf("%d requests", len(r.srv.Requests()))
	}
}

func TestSuccessResetsFailures(t *testing.T) {
	bad := calls(call("read_file", map[string]any{}))
	good := calls(call("list_dir", map[string]any{}))
	r := newRig(t, bad, bad, good, bad, bad, good, bad, bad, calls(call("finish", map[string]any{"summary": "done"})))
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
}

func TestStalled(t *testing.T) {
	same := calls(call("read_file", map[string]any{"path": "a.txt"}))
	script := []fakemodel.Reply{}
	for i := 0; i < 30; i++ {
		script = append(script, same)
	}
	r := newRig(t, script...)
	os.WriteFile(filepath.Join(r.ws, "a.txt"), []byte("same\n"), 0o644)
	out := r.run(context.Background(), "task")
	r.expect(out, run.ReasonStalled)
	// Turn 1 is progress (new output), then 12 turns without.
	if n := len(r.srv.Requests()); n != 1+DefaultStallTurns {
		t.Fatalf("%d requests", n)
	}
	recs := r.transcript(1)
	if count(recs, transcript.RecNudge) != 1 {
		t.Fatal("want one stall nudge at N/2")
	}
	for _, rec := range recs {
		if rec.Type == transcript.RecNudge && rec.Turn != 1+DefaultStallTurns/2 {
			t.Fatalf("nudge at turn %d", rec.Turn)
		}
	}
}

func TestProgressPreventsStall(t *testing.T) {
	var script []fakemodel.Reply
	for i := 0; i < 20; i++ {
		script = append(script, calls(call("bash", map[string]any{"command": "echo " + strings.Repeat("x", i+1)})))
	}
	script = append(script, calls(call("finish", map[string]any{"summary": "ok"})))
	r := newRig(t, script...)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
}

func TestStuck(t *testing.T) {
	fail := calls(call("bash", map[string]any{"command": "echo broken; exit 2"}))
	r := newRig(t, fail, fail, fail, fail, calls(call("finish", map[string]any{"summary": "x"})))
	out := r.run(context.Background(), "task")
	r.expect(out, run.ReasonStuck)
	if len(r.srv.Requests()) != StuckRepeats {
		t.Fatalf("%d requests", len(r.srv.Requests()))
	}
}

func TestFailingCommandBetweenEditsIsNotStuck(t *testing.T) {
	fail := calls(call("bash", map[string]any{"command": "exit 1"}))
	var script []fakemodel.Reply
	for i := 0; i < 5; i++ {
		script = append(script, fail, calls(call("write_file", map[string]any{"path": "f.txt", "content": strings.Repeat("y", i)})))
	}
	script = append(script, calls(call("finish", map[string]any{"summary": "ok"})))
	r := newRig(t, script...)
	r.expect(r.run(context.Background(), "task"), run.ReasonCompleted)
}

func TestMaxTurns(t *testing.T) {
	var script []fakemodel.Reply
	for i := 0; i < 10; i++ {
		script = append(script, calls(call("bash", map[string]any{"command": "echo " + strings.Repeat("z", i+1)})))
	}
	r := newRig(t, script...)
	r.spec.MaxTurns = 3
	out := r.run(context.Background(), "task")
	r.expect(out, run.ReasonMaxTurns)
	if out.Usage.Turns != 3 {
		t.Fatalf("%+v", out.Usage)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	slow := func(n int, body []byte) fakemodel.Reply {
		time.Sleep(3 * time.Second)
		return text("late")
	}
	r := newRig(t)
	r.srv = fakemodel.NewFunc(t, "test-model", slow)
	r.spec.BaseURL = r.srv.URL
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r.expect(r.run(ctx, "task"), run.ReasonTimeout)

	// A long command is stopped by cancel.
	r2 := newRig(t, calls(call("bash", map[string]any{"command": "sleep 30"})))
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel2() }()
	start := time.Now()
	r2.expect(r2.run(ctx2, "task"), run.ReasonCancelled)
	if time.Since(start) > 10*time.Second {
		t.Fatal("cancel was not prompt")
	}
	// The conversation stays valid: the interrupted call has its result.
	msgs, err := loadConversation(r2.runDir)
	if err != nil || len(msgs) != 3 || msgs[2].Role != provider.RoleTool {
		t.Fatalf("%v %+v", err, msgs)
	}
}

func TestContextExhausted(t *testing.T) {
	r := newRig(t, text("never"))
	r.spec.ContextWindow = 2000
	out := r.run(context.Background(), strings.Repeat("a very long task description ", 1000))
	r.expect(out, run.ReasonContextExhausted)
	if len(r.srv.Requests()) != 0 {
		t.Fatal("a request that cannot fit was sent")
	}
}

func TestModelErrors(t *testing.T) {
	r := newRig(t, fakemodel.Reply{Status: 401, Body: `{"error":{"message":"bad key"}}`})
	out := r.run(context.Background(), "task")
	r.expect(out, run.ReasonModelError)
	if !strings.Contains(out.Message, catalog.ModelAuth.What) {
		t.Fatal(out.Message)
	}
	// A server that echoes the key in its error: the outcome does not.
	r3 := newRig(t, fakemodel.Reply{Status: 400, Body: `{"error":{"message":"bad request from key sk-echoed-secret-123"}}`})
	r3.opts.Getenv = func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "sk-echoed-secret-123"
		}
		return ""
	}
	out = r3.run(context.Background(), "task")
	if strings.Contains(out.Message, "sk-echoed-secret-123") || !strings.Contains(out.Message, "[redacted]") {
		t.Fatal(out.Message)
	}
	r2 := newRig(t)
	r2.spec.BaseURL = "http://127.0.0.1:1/v1"
	out = r2.run(context.Background(), "task")
	r2.expect(out, run.ReasonModelError)
	if !strings.Contains(out.Message, catalog.ModelUnreachable.What) {
		t.Fatal(out.Message)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(run.AgentSpec{Name: "builtin"}, Options{Providers: testProviders})
	if !catalog.Has(err, catalog.NoModel) {
		t.Fatalf("%v", err)
	}
	_, err = New(run.AgentSpec{Model: "m", Provider: "anthropic"}, Options{Providers: testProviders, Getenv: func(string) string { return "" }})
	if !catalog.Has(err, catalog.ModelAuth) {
		t.Fatalf("%v", err)
	}
	_, err = New(run.AgentSpec{Model: "m", Provider: "bogus"}, Options{Providers: testProviders})
	if !catalog.Has(err, catalog.Usage) {
		t.Fatalf("%v", err)
	}
}
