package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider/fakemodel"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// requireCaps skips a test that needs a capability, or fails it when
// AGENTRUN_REQUIRE_CAPS=1 says the capability is expected here.
func requireCaps(t testing.TB, what string, ok bool, why string) {
	t.Helper()
	testsupport.Require(t, what, ok, "%s", why)
}

func TestBuiltinAgentKeepsKeyOnHost(t *testing.T) {
	e := newEnv(t)
	srv := fakemodel.New(t, "test-model",
		fakemodel.Calls(fakemodel.Call("write_file", map[string]any{"path": "hello.txt", "content": "hi\n"})),
		fakemodel.Calls(fakemodel.Call("run_command", map[string]any{"command": "env > env.txt"})),
		fakemodel.Calls(fakemodel.Call("finish", map[string]any{"summary": "wrote hello.txt"})),
	)
	key := "sk-planted-builtin-key"
	d, res := e.submitJSON([]string{"OPENAI_API_KEY=" + key}, "--sandbox", "host", "--agent", "builtin",
		"--model", "test-model", "--base-url", srv.URL, "--check", "hello=test -f hello.txt", "--wait", "write hello")
	if res.code != 0 {
		t.Fatalf("exit %d: %s %s\n%s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID))
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != "hi" {
		t.Fatalf("hello.txt = %q", got)
	}
	r := e.get(d.ID)
	if r.Agent.Name != "builtin" || r.Sandbox.Network != "none" {
		t.Fatalf("agent %+v network %s", r.Agent, r.Sandbox.Network)
	}
	// The key reached the model server, and nothing else.
	if env, err := resultFile(e, d.Commit, "env.txt"); err == nil && strings.Contains(env, key) {
		t.Fatal("the API key reached the sandbox")
	}
	found := false
	_ = filepath.Walk(filepath.Join(e.home), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), key) {
				t.Errorf("%s contains the API key", p)
			}
		}
		return nil
	})
	_ = found
	if len(srv.Requests()) < 3 {
		t.Fatalf("%d model requests", len(srv.Requests()))
	}
}

// resultFile reads a file of the result commit ("" if absent).
func resultFile(e *env, commit, path string) (string, error) {
	out := testsupport.Git(e.t, e.repo, "ls-tree", "--name-only", commit)
	if !strings.Contains(out, path) {
		return "", fmt.Errorf("%s not in the result", path)
	}
	return testsupport.Git(e.t, e.repo, "show", commit+":"+path), nil
}

func TestBuiltinNeedsModel(t *testing.T) {
	e := newEnv(t)
	res := e.run("submit", "--json", "--sandbox", "host", "--agent", "builtin", "t")
	must(t, res, 2)
	if !strings.Contains(res.stdout, `"no_model"`) || len(e.runIDs()) != 0 {
		t.Fatalf("%s, runs %v", res.stdout, e.runIDs())
	}
}

// TestEgressAllowlistJournalsDecisions: an agent given --allow reaches the
// network only through the proxy; a denied destination is journaled.
func TestEgressAllowlistJournalsDecisions(t *testing.T) {
	e := newEnv(t)
	_, err := os.Stat("/usr/bin/curl")
	testsupport.Require(t, "curl at /usr/bin/curl (visible in every sandbox)", err == nil, "%v", err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret-local") })}
	go srv.Serve(ln)
	defer srv.Close()
	// Loopback is denied even when the name is allowed: the agent
	// records what it got.
	// The host backend's proxy variables are cooperative (and exclude
	// loopback from proxying): ask curl to use the proxy explicitly.
	agent := `curl -s --noproxy "" -x "$http_proxy" -o /dev/null -w '%{http_code}' http://` + ln.Addr().String() + "/ > code.txt; echo >> code.txt"
	d, res := e.submitJSON(nil, "--sandbox", "host", "--allow", "example.com", "--agent-cmd", agent, "--wait", "fetch")
	must(t, res, 0)
	r := e.get(d.ID)
	if r.Sandbox.Network != "allowlist" || len(r.Sandbox.Allow) == 0 {
		t.Fatalf("sandbox %+v", r.Sandbox)
	}
	code, _ := resultFile(e, d.Commit, "code.txt")
	if strings.TrimSpace(code) == "200" {
		t.Fatal("the agent reached a loopback server through the allowlist")
	}
	evs, err := e.store().Events(t.Context(), d.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var denied bool
	for _, ev := range evs {
		if ev.Type == run.EventEgress {
			var rec struct {
				Allowed bool   `json:"allowed"`
				Host    string `json:"host"`
			}
			_ = json.Unmarshal(ev.Data, &rec)
			if !rec.Allowed && rec.Host == "127.0.0.1" {
				denied = true
			}
		}
	}
	if !denied {
		t.Fatalf("no denied egress event for 127.0.0.1 in %d events", len(evs))
	}
}

func TestProfileRefusedAtSubmit(t *testing.T) {
	e := newEnv(t)
	empty := t.TempDir() // a PATH without the CLI (git and sh are still found by full path below)
	gitDir := filepath.Dir(mustLook(t, "git"))
	cases := []struct {
		name string
		env  []string
		args []string
		code string
	}{
		{"missing CLI", []string{"PATH=" + empty + ":" + gitDir, "ANTHROPIC_API_KEY=sk-x"}, []string{"--agent", "claude"}, "agent_missing"},
		{"a builtin flag", []string{"ANTHROPIC_API_KEY=sk-x"}, []string{"--agent", "claude", "--base-url", "http://127.0.0.1:9/v1"}, "unsupported_flag"},
		{"provider flag", []string{"ANTHROPIC_API_KEY=sk-x"}, []string{"--agent", "codex", "--provider", "openai"}, "unsupported_flag"},
		{"bad model server", nil, []string{"--agent-cmd", "true", "--model-server", "not a url"}, "bad_model_server"},
		{"unreachable model server", nil, []string{"--agent-cmd", "true", "--model-server", "http://127.0.0.1:9"}, "model_unreachable"},
		{"unreachable model server, built-in agent", nil, []string{"--agent", "builtin", "--model", "m", "--model-server", "http://127.0.0.1:9"}, "model_unreachable"},
		{"negative budget", nil, []string{"--agent-cmd", "true", "--max-cost", "-1"}, "bad_budget"},
		{"missing --ro path", nil, []string{"--agent-cmd", "true", "--ro", "/nonexistent/agentrun"}, "bad_path"},
		// The CLI's own endpoint, from the environment: one the gateway
		// cannot forward as the CLI would, and one without its key.
		{"CLI endpoint not a URL", []string{"PATH=" + fakeCLI(t, "qwen") + ":" + os.Getenv("PATH"), "OPENAI_BASE_URL=open.example.com/api/v4", "OPENAI_API_KEY=sk-x"},
			[]string{"--agent", "qwen"}, "bad_cli_endpoint"},
		{"CLI endpoint without its key", []string{"PATH=" + fakeCLI(t, "claude") + ":" + os.Getenv("PATH"), "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "CLAUDE_CODE_OAUTH_TOKEN=sk-oauth"},
			[]string{"--agent", "claude"}, "no_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.agentrun(c.env, append([]string{"submit", "--json", "--sandbox", "host"}, append(c.args, "t")...)...)
			must(t, res, 2)
			var doc struct {
				Error struct{ Code, Fix string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || doc.Error.Code != c.code || doc.Error.Fix == "" {
				t.Fatalf("want %s, got %s (%v)", c.code, res.stdout, err)
			}
			if ids := e.runIDs(); len(ids) != 0 {
				t.Fatalf("runs were created: %v", ids)
			}
		})
	}
}

// fakeCLI is a directory with an executable named name in it, for
// submit to find on PATH.
func fakeCLI(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustLook(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNativeIsDefaultSandbox(t *testing.T) {
	e := newEnv(t)
	res := e.run("submit", "--json", "--agent-cmd", "echo hi > n.txt; test -r /proc/1/stat", "--wait", "native")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	must(t, res, 0)
	var d submitDoc
	_ = json.Unmarshal([]byte(res.stdout), &d)
	r := e.get(d.ID)
	if r.Sandbox.Backend != "native" || r.Provenance.Enforced["namespaces"] != "enforced" {
		t.Fatalf("backend %s enforced %v", r.Sandbox.Backend, r.Provenance.Enforced)
	}
	if strings.Contains(res.stderr, "does not isolate") {
		t.Fatal("host warning for a native run")
	}
}

// TestProfileModelCheckedAtSubmit: as for the built-in agent, a profile
// on the user's model server has its key and model checked at submit, in
// the server's own protocol (exit 2, nothing created): a key the server
// refuses is model_auth, a model it lacks model_not_loaded naming those
// it has.
func TestProfileModelCheckedAtSubmit(t *testing.T) {
	e := newEnv(t)
	srv := modelserver.New(t, realKey, "loaded-model", modelserver.Text("hi"))
	e.writeConfig(fmt.Sprintf("[model_servers.local]\nurl = %q\napi_key_env = \"LOCAL_KEY\"\n", srv.URL))
	for _, name := range []string{"claude", "qwen", "gemini"} {
		t.Run(name, func(t *testing.T) {
			path := "PATH=" + fakeCLI(t, name) + ":" + os.Getenv("PATH")
			before := len(srv.Requests())
			res := e.agentrun([]string{path, "LOCAL_KEY=" + realKey}, "submit", "--json", "--sandbox", "host", "--agent", name,
				"--model", "missing-model", "--model-server", "local", "t")
			must(t, res, 2)
			if !strings.Contains(res.stdout, "model_not_loaded") || !strings.Contains(res.stdout, "the server offers: loaded-model") {
				t.Fatalf("%s", res.stdout)
			}
			res = e.agentrun([]string{path, "LOCAL_KEY=sk-wrong"}, "submit", "--json", "--sandbox", "host", "--agent", name,
				"--model", "loaded-model", "--model-server", "local", "t")
			must(t, res, 2)
			if !strings.Contains(res.stdout, "model_auth") || !strings.Contains(res.stdout, "its key comes from LOCAL_KEY") {
				t.Fatalf("%s", res.stdout)
			}
			reqs := srv.Requests()[before:]
			if len(reqs) != 2 || reqs[0].Protocol != modelserver.Models || reqs[0].Key != realKey {
				t.Fatalf("requests %+v", reqs)
			}
			if ids := e.runIDs(); len(ids) != 0 {
				t.Fatalf("runs were created: %v", ids)
			}
		})
	}
}

// TestBuiltinModelCheckedAtSubmit: a model the server lacks, and a key it
// refuses, are caught at submit (exit 2, nothing created); a model error
// that another attempt cannot fix ends the run after one attempt.
func TestBuiltinModelCheckedAtSubmit(t *testing.T) {
	e := newEnv(t)
	srv := modelserver.New(t, realKey, "loaded-model", modelserver.Text("hi"))
	e.writeConfig(fmt.Sprintf("[model_servers.local]\nurl = %q\napi_key_env = \"LOCAL_KEY\"\n", srv.URL))
	res := e.agentrun([]string{"LOCAL_KEY=" + realKey}, "submit", "--json", "--sandbox", "host", "--agent", "builtin",
		"--model", "missing-model", "--model-server", "local", "t")
	must(t, res, 2)
	if !strings.Contains(res.stdout, "model_not_loaded") || !strings.Contains(res.stdout, "loaded-model") {
		t.Fatalf("%s", res.stdout)
	}
	res = e.agentrun([]string{"LOCAL_KEY=sk-wrong"}, "submit", "--json", "--sandbox", "host", "--agent", "builtin",
		"--model", "loaded-model", "--model-server", "local", "t")
	must(t, res, 2)
	if !strings.Contains(res.stdout, "model_auth") {
		t.Fatalf("%s", res.stdout)
	}
	if ids := e.runIDs(); len(ids) != 0 {
		t.Fatalf("runs were created: %v", ids)
	}
	// The server refuses the key once the run has started: one attempt,
	// not two.
	srv.SetScript(modelserver.Fail(401, "invalid api key"))
	d, res := e.submitJSON([]string{"LOCAL_KEY=" + realKey}, "--sandbox", "host", "--agent", "builtin", "--model", "loaded-model",
		"--model-server", "local", "--attempts", "2", "--wait", "t")
	must(t, res, 1)
	r := e.get(d.ID)
	if r.Reason != run.ReasonModelError || len(r.Attempts) != 1 {
		t.Fatalf("%s/%s after %d attempts: %s", r.State, r.Reason, len(r.Attempts), r.Message)
	}
}

// TestNetworkHintOnFailure: a check that fails for want of network points
// at --allow and agentrun egress: denied hosts under the allowlist, a
// failed connection under --network none.
func TestNetworkHintOnFailure(t *testing.T) {
	e := newEnv(t)
	check := `curl -sS --max-time 5 https://proxy.golang.org/ >/dev/null`
	// No network at all.
	d, res := e.submitJSON(nil, "--sandbox", "native", "--agent-cmd", "echo x > x.txt", "--attempts", "1", "--check", "fetch="+check, "--wait", "offline")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	must(t, res, 1)
	out := e.run("result", d.ID)
	if !strings.Contains(out.stdout, "no network (--network none)") || !strings.Contains(out.stdout, "preset:goproxy") {
		t.Fatalf("result:\n%s", out.stdout)
	}
	js := e.run("result", "--json", d.ID)
	if !strings.Contains(js.stdout, `"offline"`) {
		t.Fatalf("result --json: %s", js.stdout)
	}
	// The allowlist denies it: the hint names the host and the flag.
	d, res = e.submitJSON(nil, "--sandbox", "native", "--allow", "example.com", "--agent-cmd", "echo x > x.txt", "--attempts", "1",
		"--check", "fetch="+check, "--wait", "denied")
	must(t, res, 1)
	st := e.run("status", d.ID)
	if !strings.Contains(st.stdout, "proxy.golang.org:443") || !strings.Contains(st.stdout, "--allow proxy.golang.org:443") || !strings.Contains(st.stdout, "agentrun egress "+d.ID) {
		t.Fatalf("status:\n%s", st.stdout)
	}
	// Allowed, but this machine cannot reach it (here: its name resolves
	// nowhere): not a denial, and where this machine names a proxy, the
	// hint says that a run submitted with it leaves such a name to it.
	d, res = e.submitJSON(nil, "--sandbox", "native", "--allow", "models.corp.invalid", "--agent-cmd", "echo x > x.txt", "--attempts", "1",
		"--check", "fetch=curl -sS --max-time 5 https://models.corp.invalid/ >/dev/null", "--wait", "unreachable")
	must(t, res, 1)
	out = e.agentrun([]string{"HTTPS_PROXY=http://proxy.corp.example:3128"}, "result", d.ID)
	if !strings.Contains(out.stdout, "1 allowed host(s) could not be reached from this machine (models.corp.invalid:443)") ||
		!strings.Contains(out.stdout, "leaves a name this machine cannot resolve to that proxy (HTTPS_PROXY=http://proxy.corp.example:3128)") || strings.Contains(out.stdout, "denied by the allowlist") {
		t.Fatalf("result:\n%s", out.stdout)
	}
	js = e.run("result", "--json", d.ID)
	if !strings.Contains(js.stdout, `"unreachable": [`) || !strings.Contains(js.stdout, "did not resolve or they did not answer here") {
		t.Fatalf("result --json: %s", js.stdout)
	}
}

func TestSubmitQuiet(t *testing.T) {
	e := newEnv(t)
	res := e.run("submit", "-q", "--sandbox", "host", "--agent-cmd", "echo q > q.txt", "quiet")
	must(t, res, 0)
	id := strings.TrimSpace(res.stdout)
	if len(id) != 10 || strings.Count(res.stdout, "\n") != 1 {
		t.Fatalf("stdout %q", res.stdout)
	}
	e.waitFor(id, "the end", func(r *run.Run) bool { return r.State.Terminal() })
	res = e.run("submit", "-q", "--wait", "--sandbox", "host", "--agent-cmd", "exit 3", "--attempts", "1", "quiet fail")
	must(t, res, 1)
	if id := strings.TrimSpace(res.stdout); len(id) != 10 || strings.Contains(res.stderr, "[0:") {
		t.Fatalf("stdout %q stderr %q", res.stdout, res.stderr)
	}
}

// TestAgentCommandPreflight: an --agent-cmd whose program is missing is
// refused at submit; one installed outside the system directories is made
// visible and runs in the native sandbox.
func TestAgentCommandPreflight(t *testing.T) {
	e := newEnv(t)
	res := e.run("submit", "--json", "--agent-cmd", "no-such-agent-tool --fix", "t")
	must(t, res, 2)
	if !strings.Contains(res.stdout, "agent_missing") || len(e.runIDs()) != 0 {
		t.Fatalf("%s (runs %v)", res.stdout, e.runIDs())
	}
	res = e.run("submit", "--json", "--agent-cmd", "true", "--model", "m", "t")
	must(t, res, 2)
	if !strings.Contains(res.stdout, "unsupported_flag") {
		t.Fatal(res.stdout)
	}
	// Not under /usr (so it must be made visible); one under /tmp is TestReadOnlyUnderTmp.
	tools := toolDir(t, "fixer", "#!/bin/sh\necho fixed > fixed.txt\n")
	d, res := e.submitJSON([]string{"PATH=" + tools + ":" + os.Getenv("PATH")}, "--agent-cmd", "fixer --all", "--wait", "fix")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	must(t, res, 0)
	if got, _ := resultFile(e, d.Commit, "fixed.txt"); strings.TrimSpace(got) != "fixed" {
		t.Fatalf("fixed.txt %q", got)
	}
	if r := e.get(d.ID); !slices.Contains(r.Sandbox.ReadOnlyPaths, filepath.Join(tools, "fixer")) {
		t.Fatalf("read-only paths %v", r.Sandbox.ReadOnlyPaths)
	}
}
