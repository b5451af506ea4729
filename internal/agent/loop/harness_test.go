package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/fakemodel"
	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
)

// rig is one agent against a fake model server and a workspace.
type rig struct {
	t       *testing.T
	srv     *fakemodel.Server
	ws      string
	runDir  string
	runner  runner.Client
	spec    run.AgentSpec
	opts    Options
	ag      *Agent
	out     bytes.Buffer
	events  []run.Event
	mu      sync.Mutex
	attempt int
	env     []string // the run's agent environment
}

func newRig(t *testing.T, script ...fakemodel.Reply) *rig {
	t.Helper()
	r := &rig{t: t, srv: fakemodel.New(t, "test-model", script...), ws: t.TempDir(), runDir: t.TempDir()}
	r.runner, r.ws = startHost(t, r.ws)
	r.spec = run.AgentSpec{Name: "builtin", Model: "test-model", BaseURL: r.srv.URL, ContextWindow: 32768}
	r.opts = Options{Providers: testProviders, Getenv: func(string) string { return "" }, Retry: provider.Retry{Attempts: 1}}
	return r
}

func (r *rig) agent() *Agent {
	if r.ag == nil {
		a, err := newAgent(r.spec, r.opts)
		if err != nil {
			r.t.Fatal(err)
		}
		r.ag = a
	}
	return r.ag
}

func (r *rig) attemptDir(n int) string {
	return filepath.Join(r.runDir, "attempts", string(rune('0'+n)))
}

func (r *rig) run(ctx context.Context, prompt string) *agent.Outcome {
	r.t.Helper()
	r.attempt++
	out, err := r.agent().Attempt(ctx, agent.AttemptInput{
		Run: &run.Run{ID: "abcdefghij"}, N: r.attempt, Prompt: prompt, Runner: r.runner, WorkDir: r.ws, Env: r.env,
		Dir: r.attemptDir(r.attempt), RunDir: r.runDir, Output: &r.out,
		Event: func(e run.Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() },
	})
	if err != nil {
		r.t.Fatalf("attempt: %v", err)
	}
	return out
}

func (r *rig) expect(out *agent.Outcome, reason run.Reason) {
	r.t.Helper()
	if out.Reason != reason {
		r.t.Fatalf("reason %s (%s), want %s\nlog:\n%s", out.Reason, out.Message, reason, r.out.String())
	}
}

// wireMsg is the part of an OpenAI request message tests look at.
type wireMsg struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
	ToolCallID       string `json:"tool_call_id"`
}

type wireReq struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    json.RawMessage   `json:"tools"`
}

func decodeReq(t *testing.T, body []byte) (wireReq, []wireMsg) {
	t.Helper()
	var w wireReq
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatal(err)
	}
	msgs := make([]wireMsg, len(w.Messages))
	for i, m := range w.Messages {
		json.Unmarshal(m, &msgs[i])
	}
	return w, msgs
}

func (r *rig) lastMessages() []wireMsg {
	reqs := r.srv.Requests()
	_, m := decodeReq(r.t, reqs[len(reqs)-1])
	return m
}

func (r *rig) transcript(n int) []transcript.Record {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.attemptDir(n), transcript.File))
	if err != nil {
		r.t.Fatal(err)
	}
	var recs []transcript.Record
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec transcript.Record
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			r.t.Fatalf("transcript line %q: %v", l, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

func count(recs []transcript.Record, typ string) int {
	n := 0
	for _, r := range recs {
		if r.Type == typ {
			n++
		}
	}
	return n
}

var call = fakemodel.Call
var calls = fakemodel.Calls
var text = fakemodel.Text
