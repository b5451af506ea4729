package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
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
func (e *env) writeConfig(content string) {
	e.t.Helper()
	dir := filepath.Join(e.root, "config", "agentrun")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
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
	slow := func(modelserver.Turn) modelserver.Reply {
		n := inFlight.Add(1)
		mu.Lock()
		if n > peak.Load() {
			peak.Store(n)
		}
		mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		inFlight.Add(-1)
		return modelserver.Reply{Text: "ok"}
	}
	srv := e.scriptedServer(slow, "max_concurrent = 1\n")
	agent := chatCurl("a.json", true) + ` > code.txt; ` + chatCurl("b.json", false) + ` >> code.txt`
	var ids []string
	for i := range 3 {
		d, res := e.submitJSON([]string{"SCRIPTED_KEY=" + realKey}, "--sandbox", "host", "--model-server", "scripted",
			"--agent-cmd", agent, fmt.Sprintf("run %d", i))
		must(t, res, 0)
		ids = append(ids, d.ID)
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
