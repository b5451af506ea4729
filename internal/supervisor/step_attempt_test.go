package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// commandAgent is the --agent-cmd agent running cmd.
func commandAgent(t *testing.T, cmd string) agent.Agent {
	t.Helper()
	ag, err := external.New(run.AgentSpec{Name: external.CommandName, Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// attemptIn is an attempt step of a command agent in a host sandbox on a
// fresh workspace.
func attemptIn(t *testing.T, cmd string) (*attemptStep, *journal) {
	t.Helper()
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	startWorkspace(t, r, l)
	j := &journal{}
	return &attemptStep{Record: r, Layout: l, Agent: commandAgent(t, cmd), Sandbox: startSandbox(t, r, l).Sandbox(),
		N: 1, Prompt: "the task\n", Event: j.add}, j
}

// TestAttemptStep: the agent gets the prompt on stdin and the run's
// variables, works in the workspace, its output goes to the attempt's
// log; the attempt is journaled as started and ended, and its result
// records how it ended.
func TestAttemptStep(t *testing.T) {
	a, j := attemptIn(t, `cat > seen.txt; echo "$FOO" > foo.txt; echo to-the-log`)
	a.Env = []string{"FOO=bar"}
	before := time.Now().UTC()
	res, err := a.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := res.Outcome
	if out == nil || out.Reason != run.ReasonCompleted || out.ExitCode == nil || *out.ExitCode != 0 || res.N != 1 || res.Finished.Before(before) {
		t.Fatalf("result %+v outcome %+v", res, out)
	}
	r, l, ws := a.Record, a.Layout, a.Sandbox.WorkDir()
	for path, want := range map[string]string{
		filepath.Join(ws, "seen.txt"): "the task\n", filepath.Join(ws, "foo.txt"): "bar\n",
		l.Prompt(r.ID, 1): "the task\n", l.AgentLog(r.ID, 1): "to-the-log\n",
	} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", path, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(l.AttemptDir(r.ID, 1), "checks")); err != nil || !fi.IsDir() {
		t.Errorf("no checks directory: %v", err)
	}
	started, ended := j.of(run.EventAttempt), j.of(run.EventAgentExit)
	if len(started) != 1 || started[0].Message != "attempt 1 started" || started[0].Attempt != 1 {
		t.Fatalf("attempt events %+v", started)
	}
	if len(ended) != 1 || ended[0].Message != "attempt 1: completed (exit code 0)" || ended[0].Attempt != 1 {
		t.Fatalf("agent_exit events %+v", ended)
	}
	if d := data(t, ended[0]); d["outcome"] != "completed" || d["exit_code"] != float64(0) {
		t.Fatalf("agent_exit data %v", d)
	}
	rec := &run.Run{Attempts: []run.Attempt{{N: 1}, {N: 2}}}
	res.record(rec)
	a1 := rec.Attempts[0]
	if a1.FinishedAt == nil || !a1.FinishedAt.Equal(res.Finished) || a1.Outcome != run.ReasonCompleted || *a1.ExitCode != 0 ||
		rec.Attempts[1].FinishedAt != nil || rec.Usage != nil {
		t.Fatalf("recorded %+v, usage %+v", rec.Attempts, rec.Usage)
	}
}

// TestAttemptStepEndings: an agent that fails is a result, not an error;
// one stopped by ctx ending is cancelled.
func TestAttemptStepEndings(t *testing.T) {
	a, j := attemptIn(t, "exit 3")
	res, err := a.Run(context.Background())
	if err != nil || res.Outcome.Reason != run.ReasonAgentFailed || *res.Outcome.ExitCode != 3 {
		t.Fatalf("%+v %v", res.Outcome, err)
	}
	if ended := j.of(run.EventAgentExit); len(ended) != 1 || ended[0].Message != "attempt 1: agent_failed: the agent exited with code 3" {
		t.Fatalf("agent_exit events %+v", ended)
	}

	a, _ = attemptIn(t, "sleep 60")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err = a.Run(ctx)
	if res.Outcome == nil || res.Outcome.Reason != run.ReasonCancelled {
		t.Fatalf("%+v %v", res.Outcome, err)
	}
}

// TestAttemptStepMeteredByGateway: with a gateway, the attempt's usage is
// what the gateway counted during it (not what the run spent before), and
// its result adds that to the run's.
func TestAttemptStepMeteredByGateway(t *testing.T) {
	testsupport.Program(t, "curl")
	srv := modelserver.New(t, gatewayTestKey, "m", modelserver.Text("hello"))
	r, gw, _ := gatewayRun(t, srv)
	spent := run.Usage{PromptTokens: 1000, CompletionTokens: 100, Requests: 5}
	r.Usage = spent.Clone()
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r.Repo, r.Base = repo, base
	l := gw.Layout
	startWorkspace(t, r, l)
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer gw.Stop(context.Background())
	sb := &sandboxStep{Record: r, Layout: l, Backend: host.New(), GatewaySocket: gw.Socket(), Event: (&journal{}).add}
	if err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	cmd := `curl -sf -o /dev/null -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' ` +
		`-d '{"model":"m","messages":[{"role":"user","content":"hi"}]}' "$OPENAI_BASE_URL/chat/completions"`
	a := &attemptStep{Record: r, Layout: l, Agent: commandAgent(t, cmd), Sandbox: sb.Sandbox(), Gateway: gw,
		N: 1, Prompt: "p", Event: (&journal{}).add}
	res, err := a.Run(context.Background())
	if err != nil || res.Outcome.Reason != run.ReasonCompleted {
		t.Fatalf("%+v %v", res.Outcome, err)
	}
	u := res.Outcome.Usage
	if u == nil || u.Requests != 1 || u.PromptTokens == 0 || u.PromptTokens >= spent.PromptTokens {
		t.Fatalf("attempt usage %+v", u)
	}
	if reqs := srv.ModelRequests(modelserver.Chat); len(reqs) != 1 || reqs[0].Key != gatewayTestKey {
		t.Fatalf("requests at the model server %+v", reqs)
	}
	rec := &run.Run{Attempts: []run.Attempt{{N: 1}}, Usage: spent.Clone()}
	res.record(rec)
	if rec.Usage.Requests != 6 || rec.Attempts[0].Usage == nil || rec.Attempts[0].Usage.Requests != 1 {
		t.Fatalf("recorded usage %+v, attempt %+v", rec.Usage, rec.Attempts[0].Usage)
	}
}

// TestAttemptStepSetupFails: an attempt that cannot write its prompt has
// no outcome and records nothing.
func TestAttemptStepSetupFails(t *testing.T) {
	a, j := attemptIn(t, "true")
	if err := os.MkdirAll(a.Layout.Prompt(a.Record.ID, 1), 0o755); err != nil { // a directory where the prompt goes
		t.Fatal(err)
	}
	res, err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "write prompt") || res.Outcome != nil || j.len() != 0 {
		t.Fatalf("%+v %v, events %+v", res, err, j.evs)
	}
	rec := &run.Run{Attempts: []run.Attempt{{N: 1}}}
	res.record(rec)
	if rec.Attempts[0].FinishedAt != nil {
		t.Fatal("a failed setup was recorded")
	}
}
