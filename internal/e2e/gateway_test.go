package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// The model gateway end to end: an --agent-cmd agent inside the sandbox
// calls the run's gateway with curl (the variables agentrun sets), the
// gateway forwards to a scripted model server on the host's loopback with
// the real key, meters usage and enforces budgets.

// realKey is split so that no test source line (or check command stored
// in run.json) holds it whole: scans for it find only real leaks.
var realKey = "sk-real-" + "gateway-key-" + "7f3e9a1c"

// keyPattern matches realKey without containing it (for grep inside).
var keyPattern = "sk-real-gateway-key-7f3e9a1[c]"

// writeConfig writes the user's config.toml.
func (e *env) writeConfig(content string) { e.t.Helper(); writeConfigIn(e.t, e.root, content) }

func writeConfigIn(tb testing.TB, root, content string) {
	tb.Helper()
	dir := filepath.Join(root, "config", "agentrun")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// scriptedServer starts the scripted model server and names it in the
// config as "scripted", its key in SCRIPTED_KEY.
func (e *env) scriptedServer(script modelserver.Script, extra string) *modelserver.Server {
	e.t.Helper()
	srv := modelserver.New(e.t, realKey, "test-model", script)
	e.writeConfig(fmt.Sprintf("[model_servers.scripted]\nurl = %q\napi_key_env = \"SCRIPTED_KEY\"\n%s", srv.URL+"/v1", extra))
	return srv
}

// sandboxes lists the backends to run a gateway test on: native where it
// can run (required in CI), and host.
func sandboxes(t *testing.T, e *env) []string {
	t.Helper()
	res := e.run("submit", "--json", "--agent-cmd", "true", "--wait", "probe")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
		return []string{"host"}
	}
	return []string{"native", "host"}
}

// chatCurl is a shell command that posts one chat completion to the
// gateway with the key agentrun set, saving the answer to file.
func chatCurl(file string, stream bool) string {
	body := `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"test-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	return `curl -sS -o ` + file + ` -w '%{http_code}\n' -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' -d '` +
		body + `' "$OPENAI_BASE_URL/chat/completions"`
}

func TestGatewayLoopbackModelServer(t *testing.T) {
	e := newEnv(t)
	srv := e.scriptedServer(modelserver.Text("hello through the gateway"), "")
	for _, sb := range sandboxes(t, e) {
		t.Run(sb, func(t *testing.T) {
			agent := chatCurl("answer.json", false) + ` > code.txt; ` + chatCurl("stream.txt", true) + ` >> code.txt; ` +
				`env | grep -E '^(OPENAI|ANTHROPIC|GEMINI|AGENTRUN|GOOGLE)' | sort > env.txt`
			// Inside, nothing may hold the key: HOME, the workspace, and in
			// native (whose pid namespace and /tmp are the sandbox's own) no
			// process's environment and nothing in /tmp.
			check := `! grep -rqsE '` + keyPattern + `' "$HOME" .`
			if sb == "native" {
				check = `! grep -rqsE '` + keyPattern + `' /proc/[0-9]*/environ "$HOME" /tmp .`
			}
			d, res := e.submitJSON([]string{"SCRIPTED_KEY=" + realKey}, "--sandbox", sb, "--model-server", "scripted",
				"--agent-cmd", agent, "--check", "nokey="+check, "--wait", "ask the model")
			if res.code != 0 {
				t.Fatalf("exit %d: %s %s\n%s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID))
			}
			r := e.get(d.ID)
			if r.Sandbox.Network != "none" {
				t.Fatalf("network %s: the model needs no egress", r.Sandbox.Network)
			}
			code, _ := resultFile(e, d.Commit, "code.txt")
			if strings.TrimSpace(code) != "200\n200" {
				t.Fatalf("http codes %q", code)
			}
			answer, _ := resultFile(e, d.Commit, "answer.json")
			if !strings.Contains(answer, "hello through the gateway") {
				t.Fatalf("answer %s", answer)
			}
			stream, _ := resultFile(e, d.Commit, "stream.txt")
			if !strings.Contains(stream, "data: [DONE]") || !strings.Contains(stream, `"usage"`) {
				t.Fatalf("stream %s", stream)
			}
			envTxt, _ := resultFile(e, d.Commit, "env.txt")
			if !strings.Contains(envTxt, "OPENAI_API_KEY=agentrun-gateway-") || !strings.Contains(envTxt, "OPENAI_BASE_URL=http://127.0.0.1:") {
				t.Fatalf("agent env:\n%s", envTxt)
			}
			// Usage of both requests (the streamed one included) is recorded.
			if r.Usage == nil || r.Usage.Requests != 2 || r.Usage.PromptTokens == 0 || r.Usage.CompletionTokens == 0 ||
				r.Usage.Models["test-model"].Requests != 2 || r.Attempts[0].Usage == nil || r.Attempts[0].Usage.Requests != 2 {
				t.Fatalf("usage %+v attempts %+v", r.Usage, r.Attempts)
			}
			// The server saw the real key on every request; the sandbox only the
			// placeholder (a wrong key would have been answered 401).
			for _, q := range srv.ModelRequests(modelserver.Chat) {
				if q.Key != realKey {
					t.Fatalf("the model server got key %q", q.Key)
				}
			}
			assertNoKeyOnDisk(t, e)
		})
	}
}

// assertNoKeyOnDisk scans the data directory (runs, homes, logs,
// transcripts, journals) for the real key.
func assertNoKeyOnDisk(t *testing.T, e *env) {
	t.Helper()
	_ = filepath.Walk(e.root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !fi.Mode().IsRegular() || strings.HasPrefix(p, filepath.Join(e.root, "repo")+"/.git/objects") {
			return nil
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), realKey) {
			t.Errorf("%s contains the real key", p)
		}
		return nil
	})
}

func TestGatewayRefusesRequestWithoutToken(t *testing.T) {
	e := newEnv(t)
	srv := e.scriptedServer(modelserver.Text("never"), "")
	agent := `curl -sS -o out.json -w '%{http_code}\n' -H "Authorization: Bearer sk-guessed" -d '{"model":"m"}' "$OPENAI_BASE_URL/chat/completions" > code.txt; ` +
		`curl -sS -o /dev/null -w '%{http_code}\n' -d '{"model":"m"}' "$OPENAI_BASE_URL/chat/completions" >> code.txt`
	d, res := e.submitJSON([]string{"SCRIPTED_KEY=" + realKey}, "--sandbox", "host", "--model-server", "scripted", "--agent-cmd", agent, "--wait", "guess")
	must(t, res, 0)
	if code, _ := resultFile(e, d.Commit, "code.txt"); strings.TrimSpace(code) != "401\n401" {
		t.Fatalf("codes %q", code)
	}
	if out, _ := resultFile(e, d.Commit, "out.json"); !strings.Contains(out, "gateway key") {
		t.Fatalf("body %s", out)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the model server", n)
	}
	if !hasGatewayEvent(t, e, d.ID, "refused") {
		t.Fatal("no refused event journaled")
	}
}

func hasGatewayEvent(t *testing.T, e *env, id, kind string) bool {
	t.Helper()
	evs, err := e.store().Events(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type != run.EventGateway {
			continue
		}
		var d struct{ Kind string }
		_ = json.Unmarshal(ev.Data, &d)
		if d.Kind == kind {
			return true
		}
	}
	return false
}

func TestGatewayBudgetExceededThenResume(t *testing.T) {
	e := newEnv(t)
	srv := e.scriptedServer(modelserver.Text("a long answer that costs tokens"), "")
	// The first request spends the budget; the second is refused by the
	// gateway, which then ends the attempt: the agent's sleep never ends
	// on its own. A resumed attempt (marker present) finishes.
	agent := `if [ -f resumed.txt ]; then ` + chatCurl("second.json", false) + ` > code2.txt; echo done > done.txt; exit 0; fi; ` +
		chatCurl("first.json", false) + ` > code.txt; ` + chatCurl("refused.json", false) + ` >> code.txt; echo x > resumed.txt; sleep 60`
	start := time.Now()
	d, res := e.submitJSON([]string{"SCRIPTED_KEY=" + realKey}, "--sandbox", "host", "--model-server", "scripted",
		"--max-tokens", "5", "--agent-cmd", agent, "--wait", "spend")
	must(t, res, 1)
	if time.Since(start) > 30*time.Second {
		t.Fatal("the attempt was not stopped when the budget was spent")
	}
	r := e.get(d.ID)
	if r.State != run.StateFailed || r.Reason != run.ReasonBudgetExceeded || !strings.Contains(r.Message, "agentrun resume") {
		t.Fatalf("%s/%s: %s", r.State, r.Reason, r.Message)
	}
	if r.Usage == nil || r.Usage.Requests != 1 || r.Usage.Total() < 5 {
		t.Fatalf("usage %+v", r.Usage)
	}
	if n := len(srv.ModelRequests("")); n != 1 {
		t.Fatalf("%d requests reached the model server, want 1 (the second is refused)", n)
	}
	if !hasGatewayEvent(t, e, d.ID, "budget_exceeded") {
		t.Fatal("no budget_exceeded event")
	}
	ws := filepath.Join(e.home, "runs", d.ID, "workspace")
	if b, err := os.ReadFile(filepath.Join(ws, "code.txt")); err != nil || string(b) != "200\n400\n" {
		t.Fatalf("workspace kept? code.txt %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "refused.json")); !strings.Contains(string(b), "budget") || !strings.Contains(string(b), "agentrun resume") {
		t.Fatalf("the agent was not told why: %s", b)
	}
	// Resuming with the same budget is refused; with a higher one it goes on.
	res = e.agentrun([]string{"SCRIPTED_KEY=" + realKey}, "resume", "--json", d.ID)
	must(t, res, 2)
	if !strings.Contains(res.stdout, "bad_budget") {
		t.Fatalf("resume without a higher budget: %s", res.stdout)
	}
	res = e.agentrun([]string{"SCRIPTED_KEY=" + realKey}, "resume", "--json", "--wait", "--max-tokens", "100000", d.ID)
	if res.code != 0 {
		t.Fatalf("resume: exit %d %s %s\n%s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID))
	}
	r = e.get(d.ID)
	if r.State != run.StateSucceeded || r.Gateway.MaxTokens != 100000 || r.Usage.Requests != 2 {
		t.Fatalf("%s usage %+v gateway %+v", r.State, r.Usage, r.Gateway)
	}
	if got, _ := resultFile(e, r.Commit, "done.txt"); strings.TrimSpace(got) != "done" {
		t.Fatalf("done.txt %q", got)
	}
}

func TestGatewayMaxConcurrentSharedAcrossRuns(t *testing.T) {
	e := newEnv(t)
	var inFlight, peak atomic.Int32
	var mu sync.Mutex
	var ids []string
	// allStarted: every run's agent has started (its first request is
	// on its way to the gateway).
	allStarted := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) < 3 {
			return false
		}
		for _, id := range ids {
			if !fileExists(filepath.Join(e.home, "runs", id, "workspace", "started")) {
				return false
			}
		}
		return true
	}
	var first sync.Once
	slow := func(modelserver.Turn) modelserver.Reply {
		n := inFlight.Add(1)
		mu.Lock()
		if n > peak.Load() {
			peak.Store(n)
		}
		mu.Unlock()
		hold := 150 * time.Millisecond
		first.Do(func() {
			// The first request holds the one slot until every run's
			// agent has started, and a while more: the others' requests
			// wait for it, however the runs' starts fall on a busy
			// machine.
			for deadline := time.Now().Add(60 * time.Second); !allStarted() && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			hold = 300 * time.Millisecond
		})
		time.Sleep(hold)
		inFlight.Add(-1)
		return modelserver.Reply{Text: "ok"}
	}
	srv := e.scriptedServer(slow, "max_concurrent = 1\n")
	agent := `touch started; ` + chatCurl("a.json", true) + ` > code.txt; ` + chatCurl("b.json", false) + ` >> code.txt`
	for i := range 3 {
		d, res := e.submitJSON([]string{"SCRIPTED_KEY=" + realKey}, "--sandbox", "host", "--model-server", "scripted",
			"--agent-cmd", agent, fmt.Sprintf("run %d", i))
		must(t, res, 0)
		mu.Lock()
		ids = append(ids, d.ID)
		mu.Unlock()
	}
	for _, id := range ids {
		r := e.waitFor(id, "the end", func(r *run.Run) bool { return r.State.Terminal() })
		if r.State != run.StateSucceeded {
			t.Fatalf("%s: %s/%s %s\n%s", id, r.State, r.Reason, r.Message, e.supervisorLog(id))
		}
		if code, _ := resultFile(e, r.Commit, "code.txt"); strings.TrimSpace(code) != "200\n200" {
			t.Fatalf("%s: codes %q", id, code)
		}
	}
	if got := len(srv.ModelRequests("")); got != 6 {
		t.Fatalf("%d model requests, want 6", got)
	}
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d requests were in flight at once, max_concurrent is 1", p)
	}
	waited := false
	for _, id := range ids {
		waited = waited || hasGatewayEvent(t, e, id, "capacity_wait")
	}
	if !waited {
		t.Fatal("no capacity_wait event in any run")
	}
}

// TestKeyNeverOnDiskAfterCancelTimeoutKill: a run cancelled, timed out or
// whose supervisor is killed with kill -9 while its agent talks to the
// model leaves the real key nowhere on disk (runs, HOME, logs, journal).
func TestKeyNeverOnDiskAfterCancelTimeoutKill(t *testing.T) {
	e := newEnv(t)
	// Run directories too long a path for the gateway's unix socket,
	// which then goes to a temp dir of the supervisor's, whatever the
	// length of the test's temp dir (its random part has 1 to 10 digits).
	e.home = filepath.Join(e.root, "data-"+strings.Repeat("x", 40))
	e.vars[0] = "AGENTRUN_HOME=" + e.home
	e.scriptedServer(modelserver.Text("ok"), "")
	// The agent writes its whole environment where it would outlive it,
	// then keeps talking to the model.
	agent := `env > "$HOME/env-snapshot.sh"; env > env.txt; while true; do ` + chatCurl("a.json", false) + ` >/dev/null; sleep 0.1; done`
	tmp := testsupport.ShortDir(t)
	vars := []string{"SCRIPTED_KEY=" + realKey, "TMPDIR=" + tmp}
	sockDirs := func(pid string) []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "ar-sock-"+pid+"*"))
		return m
	}
	sb := sandboxes(t, e)[0]
	started := func(id string) *run.Run {
		return e.waitFor(id, "the agent to talk to the model", func(r *run.Run) bool {
			return r.State == run.StateRunning && fileExists(filepath.Join(e.home, "runs", id, "workspace", "a.json"))
		})
	}
	// cancel
	d, res := e.submitJSON(vars, "--sandbox", sb, "--model-server", "scripted", "--agent-cmd", agent, "cancel me")
	must(t, res, 0)
	if p := filepath.Join(e.home, "runs", d.ID, "sandbox", "gateway.sock"); len(p) < 100 {
		t.Fatalf("%s is short enough for a unix socket: the test needs a longer one", p)
	}
	started(d.ID)
	must(t, e.run("cancel", d.ID), 0)
	e.waitFor(d.ID, "cancelled", func(r *run.Run) bool { return r.State == run.StateCancelled })
	// timeout
	d2, res := e.submitJSON(vars, "--sandbox", sb, "--model-server", "scripted", "--timeout", "2s", "--agent-cmd", agent, "time out")
	must(t, res, 0)
	r := e.waitFor(d2.ID, "the timeout", func(r *run.Run) bool { return r.State.Terminal() })
	if r.Reason != run.ReasonTimeout {
		t.Fatalf("%s/%s", r.State, r.Reason)
	}
	// kill -9 of the supervisor
	d3, res := e.submitJSON(vars, "--sandbox", sb, "--model-server", "scripted", "--agent-cmd", agent, "killed")
	must(t, res, 0)
	r = started(d3.ID)
	if err := syscallKill(r.Supervisor.PID); err != nil {
		t.Fatal(err)
	}
	// The next command reconciles the run (interrupted) once the killed
	// supervisor is gone and its lock with it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		must(t, e.run("status", "--json", d3.ID), 0)
		if e.get(d3.ID).State == run.StateInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s was not reconciled to interrupted after kill -9\n%s", d3.ID, e.supervisorLog(d3.ID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The killed supervisor's socket dir outlived it, and goes with the
	// next run's.
	killed := strconv.Itoa(r.Supervisor.PID) + "-"
	if got := sockDirs(killed); len(got) != 1 {
		t.Fatalf("the killed supervisor's socket dirs: %v", got)
	}
	d4, res := e.submitJSON(vars, "--sandbox", sb, "--model-server", "scripted", "--agent-cmd", "echo x > x.txt", "--wait", "next")
	must(t, res, 0)
	if got := sockDirs(killed); len(got) != 0 {
		t.Fatalf("the killed supervisor's socket dir stayed: %v", got)
	}
	if got := sockDirs(""); len(got) != 0 {
		t.Fatalf("socket dirs after the next run %s ended: %v", d4.ID, got)
	}
	for _, id := range []string{d.ID, d2.ID, d3.ID} {
		snap, err := os.ReadFile(filepath.Join(e.home, "runs", id, "home", "env-snapshot.sh"))
		if err != nil || !strings.Contains(string(snap), "OPENAI_API_KEY=agentrun-gateway-") {
			t.Fatalf("%s: the agent's snapshot of its environment: %v\n%s", id, err, snap)
		}
	}
	assertNoKeyOnDisk(t, e)
}

// TestProfileSessionContinuesAcrossAttempts: claude's second attempt
// (after a failed check) continues the first attempt's session, and the
// attempts record it.
func TestProfileSessionContinuesAcrossAttempts(t *testing.T) {
	bin := agenttest.CLI(t, "claude", "claude")
	e := newEnv(t)
	if sandboxes(t, e)[0] != "native" {
		return // (the scripted tool call names the native sandbox's /workspace)
	}
	const dir = "/workspace"
	var wrote atomic.Int32 // files written so far
	srv := e.scriptedServer(twoAttempts(&wrote, func(turn modelserver.Turn, name string) (modelserver.Reply, bool) {
		c, ok := modelserver.WriteCall(turn.Tools, dir, name, "x\n")
		return modelserver.Reply{Text: "writing " + name, Calls: []modelserver.Call{c}}, ok
	}), "")
	d, res := e.submitJSON([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SCRIPTED_KEY=" + realKey},
		"--agent", "claude", "--model", "test-model", "--model-server", "scripted", "--attempts", "2",
		"--check", "second=test -f second.txt", "--wait", "Write first.txt")
	if res.code != 0 {
		t.Fatalf("exit %d %s\n%s", res.code, res.stdout, e.supervisorLog(d.ID))
	}
	r := e.get(d.ID)
	if len(r.Attempts) != 2 || r.Agent.Session == "" {
		t.Fatalf("attempts %+v session %q", r.Attempts, r.Agent.Session)
	}
	a1, a2 := r.Attempts[0], r.Attempts[1]
	if a1.Session != r.Agent.Session || a1.SessionContinued || a2.Session != r.Agent.Session || !a2.SessionContinued {
		t.Fatalf("sessions: %+v / %+v (run %s)", a1, a2, r.Agent.Session)
	}
	// The second attempt's first request carries the first attempt's
	// conversation: claude continued its session.
	var second []byte
	for _, q := range srv.ModelRequests(modelserver.Anthropic) {
		if strings.Contains(string(q.Body), "these checks failed") {
			second = q.Body
			break
		}
	}
	if second == nil || !strings.Contains(string(second), "writing first.txt") {
		t.Fatalf("the second attempt did not continue the first one's conversation")
	}
	if a1.Usage == nil || a2.Usage == nil || a1.Usage.Requests+a2.Usage.Requests != r.Usage.Requests {
		t.Fatalf("attempt usage %+v %+v run %+v", a1.Usage, a2.Usage, r.Usage)
	}
}

// twoAttempts scripts a run whose first attempt writes first.txt and
// whose check then fails: the second attempt, told so, writes second.txt.
// write is the agent's tool call that writes a file (ok: the agent has
// such a tool); wrote counts the files the script had written.
func twoAttempts(wrote *atomic.Int32, write func(turn modelserver.Turn, name string) (modelserver.Reply, bool)) modelserver.Script {
	return func(turn modelserver.Turn) modelserver.Reply {
		name := ""
		switch {
		case turn.ToolResults == 0 && wrote.Load() == 0:
			name = "first.txt"
		case strings.Contains(turn.LastUser, "checks failed") && wrote.Load() == 1:
			name = "second.txt"
		}
		if name != "" {
			if r, ok := write(turn, name); ok {
				wrote.Add(1)
				return r
			}
		}
		return modelserver.Reply{Text: "finished this attempt"}
	}
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// TestGatewayModelFailureHint: when the model server refuses the agent's
// requests or goes away during an attempt, the agent exits with a code of
// its own and its output names the gateway, not the server. result and
// status say what happened and the fix, from the gateway's journal; and
// the gateway's "connection refused" in the agent's output is not taken
// for a missing network (no --allow would help).
func TestGatewayModelFailureHint(t *testing.T) {
	e := newEnv(t)
	// Agents as CLIs are: give up on an answer that is not 200, print it.
	once := `code=$(` + chatCurl("answer.json", false) + `); cat answer.json; [ "$code" = 200 ]`
	untilGone := `for i in $(seq 300); do code=$(` + chatCurl("answer.json", false) + `); [ "$code" = 200 ] || break; sleep 0.05; done; cat answer.json; exit 1`
	type hint struct {
		Upstream string
		Status   int
		Key      string
		Path     string
		Errors   int
		Hint     string
	}
	resultOf := func(t *testing.T, id string, reason string) (model *hint, network json.RawMessage) {
		t.Helper()
		res := e.run("result", "--json", id)
		var out struct {
			Status  string
			Reason  string
			Model   *hint
			Network json.RawMessage
		}
		if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
			t.Fatalf("%v: %s %s", err, res.stdout, res.stderr)
		}
		if out.Status != "failed" || out.Reason != reason || out.Model == nil {
			t.Fatalf("result: %s", res.stdout)
		}
		human := e.run("status", id)
		if !strings.Contains(human.stdout, "model") || !strings.Contains(strings.Join(strings.Fields(human.stdout), " "), out.Model.Hint) {
			t.Errorf("status does not say the model hint %q:\n%s", out.Model.Hint, human.stdout)
		}
		return out.Model, out.Network
	}
	t.Run("wrong key", func(t *testing.T) {
		// An agent that retries a refused key as Claude Code does (for
		// minutes): the gateway gives up on the second 401 in a row, and
		// the attempt ends after the grace, as a model_error that is not
		// tried again. Resumed with the right key, the run goes on.
		srv := e.scriptedServer(modelserver.Text("hello"), "")
		retries := `for i in $(seq 600); do code=$(` + chatCurl("answer.json", false) + `); [ "$code" = 200 ] && exit 0; sleep 0.1; done; exit 1`
		t0 := time.Now()
		d, res := e.submitJSON([]string{"SCRIPTED_KEY=sk-wrong-key"}, "--sandbox", "host", "--model-server", "scripted",
			"--attempts", "3", "--agent-cmd", retries, "--wait", "ask")
		must(t, res, 1)
		if took := time.Since(t0); took > 30*time.Second {
			t.Fatalf("the run took %s", took)
		}
		r := e.get(d.ID)
		if r.Reason != run.ReasonModelError || len(r.Attempts) != 1 ||
			!strings.Contains(r.Message, "refused the key from SCRIPTED_KEY (401 Unauthorized) on 2 model requests in a row") ||
			!strings.Contains(r.Message, "agentrun resume "+d.ID) {
			t.Fatalf("run %s (%s): %s, %d attempts", r.State, r.Reason, r.Message, len(r.Attempts))
		}
		m, _ := resultOf(t, d.ID, "model_error")
		if m.Status != 401 || m.Key != "SCRIPTED_KEY" || m.Errors < 2 || m.Upstream != srv.URL ||
			!strings.Contains(m.Hint, "refused the key from SCRIPTED_KEY (401 Unauthorized, ") || !strings.Contains(m.Hint, "give SCRIPTED_KEY a key") {
			t.Fatalf("model hint %+v", m)
		}
		if strings.Contains(res.stdout+res.stderr, "sk-wrong-key") {
			t.Fatal("the key was printed")
		}
		res = e.agentrun([]string{"SCRIPTED_KEY=" + realKey}, "resume", "--wait", d.ID)
		if res.code != 0 {
			t.Fatalf("resume with the right key: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
		}
		if r := e.get(d.ID); r.State != run.StateSucceeded || len(r.Attempts) != 2 {
			t.Fatalf("after resume: %s, %d attempts", r.State, len(r.Attempts))
		}
	})
	t.Run("no key", func(t *testing.T) {
		srv := modelserver.New(t, realKey, "test-model", modelserver.Text("never"))
		e.writeConfig(fmt.Sprintf("[model_servers.keyless]\nurl = %q\n", srv.URL+"/v1"))
		d, res := e.submitJSON(nil, "--sandbox", "host", "--model-server", "keyless", "--attempts", "1", "--agent-cmd", once, "--wait", "ask")
		must(t, res, 1)
		m, _ := resultOf(t, d.ID, "agent_failed")
		if m.Status != 401 || m.Key != "" || !strings.Contains(m.Hint, "refused requests without a key") || !strings.Contains(m.Hint, "api_key_env") {
			t.Fatalf("model hint %+v", m)
		}
		// submit --wait says it as the run ends.
		res = e.run("submit", "--sandbox", "host", "--model-server", "keyless", "--attempts", "1", "--agent-cmd", once, "--wait", "ask")
		if res.code != 1 || !strings.Contains(res.stdout, "\nmodel: the model server "+srv.URL+" refused requests without a key") {
			t.Fatalf("exit %d\n%s", res.code, res.stdout)
		}
	})
	t.Run("no such model", func(t *testing.T) {
		// A server that lacks the model, or has no API where its URL
		// says: 404 to every model request. (Its URL is an OpenAI API's
		// base, as an OpenAI client takes it: /api/v4/chat/completions.)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`)
		}))
		defer srv.Close()
		d, res := e.submitJSON(nil, "--sandbox", "host", "--model-server", srv.URL+"/api/v4", "--model", "m-404",
			"--attempts", "1", "--agent-cmd", once, "--wait", "ask")
		must(t, res, 1)
		m, _ := resultOf(t, d.ID, "agent_failed")
		if m.Status != 404 || m.Path != "/api/v4/chat/completions" || !strings.Contains(m.Hint, `check that it serves the model "m-404"`) {
			t.Fatalf("model hint %+v", m)
		}
	})
	t.Run("server gone", func(t *testing.T) {
		srv := e.scriptedServer(modelserver.Text("hello"), "")
		d, res := e.submitJSON([]string{"SCRIPTED_KEY=" + realKey}, "--sandbox", "host", "--model-server", "scripted",
			"--attempts", "1", "--agent-cmd", untilGone, "ask until the server goes")
		must(t, res, 0)
		deadline := time.Now().Add(30 * time.Second)
		for len(srv.ModelRequests(modelserver.Chat)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no request reached the model server\n%s", e.supervisorLog(d.ID))
			}
			time.Sleep(20 * time.Millisecond)
		}
		srv.Close()
		e.waitFor(d.ID, "the run to end", func(r *run.Run) bool { return r.State.Terminal() })
		m, network := resultOf(t, d.ID, "agent_failed")
		if m.Status != 0 || m.Errors != 1 || !strings.Contains(m.Hint, "could not be reached (once in attempt 1)") {
			t.Fatalf("model hint %+v", m)
		}
		// The agent printed the gateway's "connection refused": not a
		// missing network.
		if log := e.run("logs", d.ID); !strings.Contains(log.stdout, "connection refused") {
			t.Fatalf("agent output: %s", log.stdout)
		}
		if len(network) != 0 {
			t.Fatalf("network hint %s beside the model hint", network)
		}
	})
}
