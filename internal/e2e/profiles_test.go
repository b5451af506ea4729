package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// Each profile's real CLI (installed by .ci/install-agents.sh under
// /opt/agentrun-ci, outside every directory the sandbox shows by default)
// runs end to end through `agentrun submit --wait` in the native sandbox
// with --network none, against the scripted model server on the host's
// loopback, which checks every request's key.
func TestProfilesEndToEnd(t *testing.T) {
	content := "hello from the model\n"
	profiles := []struct {
		name, binary string
		proto        modelserver.Protocol
		script       modelserver.Script
	}{
		{"claude", "claude", modelserver.Anthropic, modelserver.WriteFileIn("/workspace", "hello.txt", content)},
		{"codex", "codex", modelserver.Responses, modelserver.ShellWriteFile("hello.txt", content)},
		{"gemini", "gemini", modelserver.Gemini, modelserver.WriteFileIn("/workspace", "hello.txt", content)},
		{"qwen", "qwen", modelserver.Chat, modelserver.WriteFileIn("/workspace", "hello.txt", content)},
		{"opencode", "opencode", modelserver.Chat, modelserver.WriteFileIn("/workspace", "hello.txt", content)},
	}
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, p.name, p.binary)
			if !ok {
				return
			}
			srv := e.scriptedServer(p.script, "")
			pathEnv := "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")
			start := time.Now()
			check := `test "$(cat hello.txt)" = 'hello from the model' && ! grep -rqsE '` + keyPattern + `' /proc/[0-9]*/environ "$HOME" /tmp .`
			d, res := e.submitJSON([]string{pathEnv, "SCRIPTED_KEY=" + realKey}, "--agent", p.name, "--model", "test-model",
				"--model-server", "scripted", "--attempts", "1", "--timeout", "3m", "--check", "hello="+check, "--wait", "Write hello.txt")
			took := time.Since(start)
			if res.code != 0 {
				log := e.agentLog(d.ID)
				chk, _ := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "attempts", "1", "checks", "hello.log"))
				t.Fatalf("exit %d: %s %s\nagent.log:\n%s\ncheck:\n%s\nsupervisor:\n%s\nrequests: %d", res.code, res.stdout, res.stderr, log, chk, e.supervisorLog(d.ID), len(srv.Requests()))
			}
			t.Logf("%s: run took %s", p.name, took.Round(time.Millisecond))
			r := e.get(d.ID)
			if r.Sandbox.Backend != "native" || r.Sandbox.Network != "none" {
				t.Fatalf("sandbox %+v", r.Sandbox)
			}
			if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != strings.TrimSpace(content) {
				t.Fatalf("hello.txt = %q", got)
			}
			if !strings.HasPrefix(r.Agent.Binary, agenttest.Root()) || len(r.Sandbox.ReadOnlyPaths) == 0 {
				t.Fatalf("binary %s visible %v", r.Agent.Binary, r.Sandbox.ReadOnlyPaths)
			}
			// codex's npm launcher (a Node script) only runs its native
			// program: the run ran that program, from the launcher's
			// package, which the sandbox shows.
			launcher, _ := filepath.EvalSymlinks(bin)
			if p.name == "codex" {
				if r.Agent.Launcher != launcher || !strings.HasSuffix(r.Agent.Binary, "/vendor/x86_64-unknown-linux-musl/bin/codex") ||
					!strings.HasPrefix(r.Agent.Binary, filepath.Dir(filepath.Dir(launcher))+"/") {
					t.Fatalf("codex: binary %s, launcher %s (on PATH: %s)", r.Agent.Binary, r.Agent.Launcher, launcher)
				}
			} else if r.Agent.Launcher != "" || r.Agent.Binary != launcher {
				t.Fatalf("%s: binary %s, launcher %q (on PATH: %s)", p.name, r.Agent.Binary, r.Agent.Launcher, launcher)
			}
			if r.Usage == nil || r.Usage.Requests == 0 || r.Usage.PromptTokens == 0 || r.Usage.CompletionTokens == 0 {
				t.Fatalf("usage %+v", r.Usage)
			}
			reqs := srv.ModelRequests(p.proto)
			if len(reqs) == 0 {
				t.Fatalf("no %s request reached the model server (%d requests)", p.proto, len(srv.Requests()))
			}
			for _, q := range srv.Requests() {
				if q.Key != realKey {
					t.Fatalf("%s %s reached the model server with key %q", q.Method, q.Path, q.Key)
				}
			}
			if int(r.Usage.Requests) != len(srv.ModelRequests("")) {
				t.Errorf("usage counts %d requests, the server saw %d", r.Usage.Requests, len(srv.ModelRequests("")))
			}
			if r.Attempts[0].Outcome != run.ReasonCompleted {
				t.Fatalf("attempt %+v", r.Attempts[0])
			}
			assertNoKeyOnDisk(t, e)
		})
	}
}

// The first run of a profile with a warm HOME (codex, claude) warms the
// CLI's HOME up (the CLI once more, before the attempt, with no task and
// no model) and keeps it as a template; the next run's HOME starts from a
// copy of it, and its second attempt still continues its own first
// attempt's session. The template holds nothing of either run: no task,
// no placeholder, no key, no profile config, none of the CLI's
// per-process files or sessions; the warm-up reached no model.
func TestProfileWarmHome(t *testing.T) {
	for _, p := range []struct {
		name  string
		proto modelserver.Protocol
		write func(turn modelserver.Turn, name string) (modelserver.Reply, bool)
		// volatile are what the template must not keep; id is a file
		// the CLI makes on its first run in a HOME, and idOf its value
		// there.
		volatile []string
		id       string
		idOf     func(b []byte) string
	}{
		{"codex", modelserver.Responses, func(turn modelserver.Turn, name string) (modelserver.Reply, bool) {
			r := modelserver.ShellWriteFile(name, "x\n")(modelserver.Turn{Tools: turn.Tools})
			return r, len(r.Calls) > 0
		}, []string{".codex/tmp", ".codex/shell_snapshots", ".codex/config.toml", "tmp"},
			".codex/installation_id", func(b []byte) string { return string(b) }},
		{"claude", modelserver.Anthropic, func(turn modelserver.Turn, name string) (modelserver.Reply, bool) {
			c, ok := modelserver.WriteCall(turn.Tools, "/workspace", name, "x\n")
			return modelserver.Reply{Text: "writing " + name, Calls: []modelserver.Call{c}}, ok
		}, []string{".claude/projects", ".claude/backups", "tmp"},
			".claude.json", func(b []byte) string {
				var c struct{ UserID string }
				_ = json.Unmarshal(b, &c)
				return c.UserID
			}},
	} {
		t.Run(p.name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, p.name, p.name)
			if !ok {
				return
			}
			ids, second := warmHomeRuns(t, e, bin, p.name, p.proto, p.write)
			if second == nil || !strings.Contains(string(second), "first.txt") {
				t.Fatal("the second attempt did not continue the first one's conversation")
			}
			tpls, _ := filepath.Glob(filepath.Join(e.home, "cache", "agent-homes", p.name+"-*"))
			if len(tpls) != 1 {
				t.Fatalf("templates %v", tpls)
			}
			tpl := tpls[0]
			for _, v := range p.volatile {
				if _, err := os.Lstat(filepath.Join(tpl, v)); err == nil {
					t.Errorf("the template keeps %s", v)
				}
			}
			// The CLI makes its id on its first run in a HOME: both runs
			// have the warm-up's.
			b, err := os.ReadFile(filepath.Join(tpl, p.id))
			want := p.idOf(b)
			if err != nil || want == "" {
				t.Fatalf("template's %s: %q %v", p.id, b, err)
			}
			for _, id := range ids {
				if b, _ := os.ReadFile(filepath.Join(e.home, "runs", id, "home", p.id)); p.idOf(b) != want {
					t.Fatalf("run %s: id %q, the template's %q", id, p.idOf(b), want)
				}
			}
			_ = filepath.Walk(tpl, func(path string, fi os.FileInfo, err error) error {
				if err != nil || !fi.Mode().IsRegular() {
					return nil
				}
				b, _ := os.ReadFile(path)
				for _, s := range []string{"Write the files", "agentrun-gateway-", realKey} {
					if strings.Contains(string(b), s) {
						t.Errorf("%s holds %q", path, s)
					}
				}
				return nil
			})
			assertNoKeyOnDisk(t, e)
		})
	}
}

// warmHomeRuns submits two runs of profile name: one attempt, then two
// (the first one's check fails). The first says its HOME was warmed, the
// second that it came from the template; the second's second attempt
// continued its first attempt's session (it returns that attempt's first
// request, nil if none), and no request reached the model from a warm-up.
func warmHomeRuns(t *testing.T, e *env, bin, name string, proto modelserver.Protocol, write func(modelserver.Turn, string) (modelserver.Reply, bool)) (ids []string, second []byte) {
	t.Helper()
	pathEnv := "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")
	var wrote atomic.Int32 // files the second run's attempts wrote
	scripts := []modelserver.Script{func(turn modelserver.Turn) modelserver.Reply {
		if r, ok := write(turn, "hello.txt"); ok && turn.ToolResults == 0 {
			return r
		}
		return modelserver.Reply{Text: "done"}
	}, twoAttempts(&wrote, write)}
	var servers []*modelserver.Server
	for i, args := range [][]string{{"--attempts", "1"}, {"--attempts", "2", "--check", "second=test -f second.txt"}} {
		srv := e.scriptedServer(scripts[i], "")
		d, res := e.submitJSON([]string{pathEnv, "SCRIPTED_KEY=" + realKey}, append([]string{"--agent", name, "--model", "test-model",
			"--model-server", "scripted", "--timeout", "3m", "--wait", "Write the files"}, args...)...)
		if res.code != 0 {
			log := e.agentLog(d.ID)
			t.Fatalf("exit %d: %s %s\nagent.log:\n%s\nsupervisor:\n%s", res.code, res.stdout, res.stderr, log, e.supervisorLog(d.ID))
		}
		ids, servers = append(ids, d.ID), append(servers, srv)
		if r := e.get(d.ID); r.Usage == nil || int(r.Usage.Requests) != len(srv.ModelRequests("")) {
			t.Fatalf("run %d: usage %+v, the server saw %d requests", i+1, r.Usage, len(srv.ModelRequests("")))
		}
		for _, q := range srv.Requests() {
			if strings.Contains(string(q.Body), "Reply with OK.") {
				t.Fatalf("run %d: the warm-up reached the model server", i+1)
			}
		}
		if i == 0 {
			// The next run's HOME, copied from the template ahead by the
			// supervisor before it exits.
			e.released(d.ID)
			if m, _ := filepath.Glob(filepath.Join(e.home, "cache", "agent-homes", ".spare-"+name+"-*")); len(m) != 1 {
				t.Fatalf("spare HOMEs after the first run's supervisor exited: %v", m)
			}
		}
	}
	for i, want := range []string{"warmed", "template"} {
		if got, _ := homeEvents(t, e, ids[i]); !slices.Equal(got, []string{want}) {
			t.Fatalf("run %d: home events %v, want [%s]", i+1, got, want)
		}
	}
	if _, msg := homeEvents(t, e, ids[1]); !strings.Contains(msg, "made ahead") {
		t.Fatalf("run 2 did not start from the spare HOME: %q", msg)
	}
	if r := e.get(ids[1]); len(r.Attempts) != 2 || !r.Attempts[1].SessionContinued || wrote.Load() != 2 {
		t.Fatalf("attempts %+v, files written %d", r.Attempts, wrote.Load())
	}
	for _, q := range servers[1].ModelRequests(proto) {
		if strings.Contains(string(q.Body), "checks failed") {
			return ids, q.Body
		}
	}
	return ids, nil
}

// profileEnv starts a parallel subtest of profile name's real CLI (binary):
// the CLI's path and a new environment; ok false where the native sandbox
// is not there (requireCaps failed or skipped the test).
func profileEnv(t *testing.T, name, binary string) (bin string, e *env, ok bool) {
	t.Helper()
	t.Parallel()
	bin = agenttest.CLI(t, name, binary)
	e = newEnv(t)
	return bin, e, sandboxes(t, e)[0] == "native"
}

// homeEvents are the kinds of a run's home events, in order, and their
// messages, one a line.
func homeEvents(t *testing.T, e *env, id string) (kinds []string, msgs string) {
	t.Helper()
	evs, err := e.store().Events(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == run.EventHome {
			var d struct{ Kind string }
			_ = json.Unmarshal(ev.Data, &d)
			kinds = append(kinds, d.Kind)
			msgs += ev.Message + "\n"
		}
	}
	return kinds, msgs
}

// codex runs in the docker sandbox, in the test image (busybox, no
// Node.js): the run starts the native program of codex's npm launcher,
// which needs nothing of the image, and reaches the model through the
// gateway bridged into the container, with --network none.
func TestProfileInContainer(t *testing.T) {
	bin := agenttest.CLI(t, "codex", "codex")
	e := newEnv(t)
	content := "hello from the model\n"
	srv := e.scriptedServer(modelserver.ShellWriteFile("hello.txt", content), "")
	d, res := e.submitDocker([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SCRIPTED_KEY=" + realKey},
		"--agent", "codex", "--model", "test-model", "--model-server", "scripted", "--attempts", "1", "--timeout", "3m",
		"--check", "hello=test \"$(cat hello.txt)\" = 'hello from the model' && ! grep -rqsE '"+keyPattern+"' /proc/[0-9]*/environ \"$HOME\" /tmp .",
		"--wait", "Write hello.txt")
	if res.code != 0 {
		log := e.agentLog(d.ID)
		t.Fatalf("exit %d: %s %s\nagent.log:\n%s\nsupervisor:\n%s", res.code, res.stdout, res.stderr, log, e.supervisorLog(d.ID))
	}
	r := e.get(d.ID)
	if r.Sandbox.Backend != "docker" || r.Sandbox.Network != "none" || r.Agent.Launcher == "" {
		t.Fatalf("sandbox %+v agent %+v", r.Sandbox, r.Agent)
	}
	if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != strings.TrimSpace(content) {
		t.Fatalf("hello.txt = %q", got)
	}
	if len(srv.ModelRequests(modelserver.Responses)) == 0 || r.Usage == nil || int(r.Usage.Requests) != len(srv.ModelRequests("")) {
		t.Fatalf("usage %+v, the server saw %d requests", r.Usage, len(srv.ModelRequests("")))
	}
	for _, q := range srv.Requests() {
		if q.Key != realKey {
			t.Fatalf("%s %s reached the model server with key %q", q.Method, q.Path, q.Key)
		}
	}
	assertNoKeyOnDisk(t, e)
}

// TestProfileFollowsCLIEndpoint: a CLI set up in the user's environment
// for an endpoint of its own (ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN
// for an Anthropic-compatible provider, Qwen Code's OPENAI_BASE_URL,
// Gemini CLI's GOOGLE_GEMINI_BASE_URL) and a model (ANTHROPIC_MODEL, ...)
// runs through agentrun as it runs bare, with no --model-server, no
// --model, no config: the gateway forwards there with that key, and
// neither the key nor another provider's reaches the public API or the
// sandbox. An OpenAI-compatible API not under /v1 (Zhipu's
// .../api/paas/v4) is reached where the CLI would reach it bare.
func TestProfileFollowsCLIEndpoint(t *testing.T) {
	for _, p := range []struct {
		name, profile string
		proto         modelserver.Protocol
		under         string // where the server has its API: its root, or an OpenAI-compatible base
		env           func(url string) []string
	}{
		{"claude", "claude", modelserver.Anthropic, "", func(url string) []string {
			return []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_AUTH_TOKEN=" + realKey, "ANTHROPIC_API_KEY=sk-for-another-provider", "ANTHROPIC_MODEL=env-model"}
		}},
		{"qwen", "qwen", modelserver.Chat, "", func(url string) []string {
			return []string{"OPENAI_BASE_URL=" + url + "/v1", "OPENAI_API_KEY=" + realKey, "OPENAI_MODEL=env-model"}
		}},
		{"qwen api base", "qwen", modelserver.Chat, "/api/paas/v4", func(url string) []string {
			return []string{"OPENAI_BASE_URL=" + url + "/api/paas/v4", "OPENAI_API_KEY=" + realKey, "OPENAI_MODEL=env-model"}
		}},
		{"gemini", "gemini", modelserver.Gemini, "", func(url string) []string {
			return []string{"GOOGLE_GEMINI_BASE_URL=" + url, "GEMINI_API_KEY=" + realKey, "GEMINI_MODEL=env-model"}
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, p.profile, p.profile)
			if !ok {
				return
			}
			srv := modelserver.New(t, realKey, "env-model", modelserver.WriteFileIn("/workspace", "hello.txt", "hi\n"))
			if p.under != "" {
				srv.Under(p.under)
			}
			env := append(p.env(srv.URL), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
			d, res := e.submitJSON(env, "--agent", p.profile, "--attempts", "1", "--timeout", "3m", "--wait", "Write hello.txt")
			if res.code != 0 {
				t.Fatalf("exit %d: %s %s\nsupervisor:\n%s\nrequests: %+v", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID), paths(srv.Requests()))
			}
			r := e.get(d.ID)
			if r.Agent.Model != "env-model" || r.Gateway == nil || r.Gateway.Routes[0].URL != srv.URL+p.under || r.Gateway.Routes[0].Base != (p.under != "") {
				t.Fatalf("model %q, gateway %+v", r.Agent.Model, r.Gateway)
			}
			if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != "hi" {
				t.Fatalf("hello.txt = %q", got)
			}
			reqs := srv.ModelRequests(p.proto)
			if len(reqs) == 0 {
				t.Fatalf("no %s request reached the endpoint (%d requests)", p.proto, len(srv.Requests()))
			}
			for _, q := range reqs {
				if !strings.Contains(q.Path+string(q.Body), "env-model") {
					t.Fatalf("a request not for the environment's model: %s %s", q.Path, q.Body)
				}
			}
			for _, q := range srv.Requests() {
				if q.Key != realKey || !strings.HasPrefix(q.Path, p.under+"/") {
					t.Fatalf("%s %s reached the endpoint with key %q (its API is under %s/)", q.Method, q.Path, q.Key, p.under)
				}
			}
			assertNoKeyOnDisk(t, e)
		})
	}
}

// paths are the method and path of each request, for failure messages.
func paths(reqs []modelserver.Request) []string {
	var out []string
	for _, q := range reqs {
		out = append(out, q.Method+" "+q.Path)
	}
	return out
}

// agentEnv is an environment to run agent name in: the built-in agent
// (binary "") or a profile's CLI, found on the PATH it gives (profileEnv).
func agentEnv(t *testing.T, name, binary string) (e *env, vars []string, ok bool) {
	t.Helper()
	if binary == "" {
		t.Parallel()
		return newEnv(t), nil, true
	}
	bin, e, ok := profileEnv(t, name, binary)
	return e, []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")}, ok
}

// TestModelServerAPIBase: --model-server names an OpenAI-compatible API
// that is not under /v1 (Zhipu's https://open.bigmodel.cn/api/paas/v4,
// Volcengine's .../api/v3) as an OpenAI client names it, its base: the
// submit's model check asks that base for its models, and the agent's
// requests go there, for the built-in agent and for a CLI that reads its
// endpoint from its own config file (opencode), in the native sandbox.
func TestModelServerAPIBase(t *testing.T) {
	const base = "/api/paas/v4"
	for _, c := range []struct{ name, binary string }{{"builtin", ""}, {"opencode", "opencode"}} {
		t.Run(c.name, func(t *testing.T) {
			e, env, ok := agentEnv(t, c.name, c.binary)
			if !ok {
				return
			}
			srv := modelserver.New(t, realKey, "zm-4", modelserver.WriteFileIn("/workspace", "hello.txt", "hi\n"))
			srv.Under(base)
			env = append(env, "ZM_KEY="+realKey)
			e.writeConfig(fmt.Sprintf("[model_servers.zm]\nurl = %q\napi_key_env = \"ZM_KEY\"\n", srv.URL+base))
			res := e.agentrun(env, "submit", "--json", "--agent", c.name, "--model", "zm-3", "--model-server", srv.URL+base, "t")
			must(t, res, 2)
			if !strings.Contains(res.stdout, "model_not_loaded") || !strings.Contains(res.stdout, "the server offers: zm-4") {
				t.Fatalf("a model the server lacks: %s", res.stdout)
			}
			d, res := e.submitJSON(env, "--agent", c.name, "--model", "zm-4", "--model-server", "zm", "--attempts", "1", "--timeout", "3m", "--wait", "Write hello.txt")
			if res.code != 0 {
				t.Fatalf("exit %d: %s %s\nsupervisor:\n%s\nrequests: %+v", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID), paths(srv.Requests()))
			}
			if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != "hi" {
				t.Fatalf("hello.txt = %q", got)
			}
			r := e.get(d.ID)
			if rs := r.Gateway.Routes[0]; rs.URL != srv.URL+base || !rs.Base || r.Usage == nil || r.Usage.Requests == 0 {
				t.Fatalf("route %+v usage %+v", rs, r.Usage)
			}
			for _, q := range srv.Requests() {
				if !strings.HasPrefix(q.Path, base+"/") || q.Key != realKey {
					t.Fatalf("%s %s with key %q: the API is under %s/", q.Method, q.Path, q.Key, base)
				}
			}
		})
	}
}

// TestGatewayThroughCompanyProxy: behind a company's proxy and its own
// certificate authority (HTTPS_PROXY and NODE_EXTRA_CA_CERTS in the
// user's environment, as Claude Code and the other CLIs read them bare),
// a run reaches a model server whose name only the proxy resolves: the
// submit's checks and the gateway go through the proxy and trust that
// CA, in the native sandbox with --network none, for the built-in agent
// and the real claude CLI.
func TestGatewayThroughCompanyProxy(t *testing.T) {
	for _, c := range []struct{ name, binary string }{{"builtin", ""}, {"claude", "claude"}} {
		t.Run(c.name, func(t *testing.T) {
			e, env, ok := agentEnv(t, c.name, c.binary)
			if !ok {
				return
			}
			ca := testsupport.NewPrivateCA(t)
			srv := modelserver.NewTLS(t, realKey, "corp-model", modelserver.WriteFileIn("/workspace", "hello.txt", "hi\n"), ca.Leaf(t, "models.corp.invalid"))
			addr := strings.TrimPrefix(srv.URL, "https://")
			_, port, _ := strings.Cut(addr, ":")
			name := "models.corp.invalid:" + port
			px := testsupport.NewForwardProxy(t, map[string]string{name: addr})
			caFile := filepath.Join(e.root, "corp-ca.pem")
			if err := os.WriteFile(caFile, ca.CAPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			e.writeConfig(fmt.Sprintf("[model_servers.corp]\nurl = %q\napi_key_env = \"CORP_KEY\"\n", "https://"+name+"/v1"))
			env = append(env, "CORP_KEY="+realKey, "HTTPS_PROXY="+px.URL, "NODE_EXTRA_CA_CERTS="+caFile)
			res := e.agentrun(env, "submit", "--json", "--agent", c.name, "--model", "other-model", "--model-server", "corp", "t")
			must(t, res, 2)
			if !strings.Contains(res.stdout, "model_not_loaded") || !strings.Contains(res.stdout, "the server offers: corp-model") {
				t.Fatalf("the submit's model check through the proxy: %s", res.stdout)
			}
			d, res := e.submitJSON(env, "--agent", c.name, "--model", "corp-model", "--model-server", "corp", "--attempts", "1", "--timeout", "3m", "--wait", "Write hello.txt")
			if res.code != 0 {
				t.Fatalf("exit %d: %s %s\nsupervisor:\n%s\nproxy: %v requests: %v", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID), px.Targets(), paths(srv.Requests()))
			}
			if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != "hi" {
				t.Fatalf("hello.txt = %q", got)
			}
			r := e.get(d.ID)
			if r.Sandbox.Network != "none" || r.Usage == nil || r.Usage.Requests == 0 {
				t.Fatalf("network %s, usage %+v", r.Sandbox.Network, r.Usage)
			}
			if n := len(srv.ModelRequests(modelserver.Chat)) + len(srv.ModelRequests(modelserver.Anthropic)); n == 0 {
				t.Fatalf("no model request reached the server: %v", paths(srv.Requests()))
			}
			for _, q := range srv.Requests() {
				if q.Key != realKey {
					t.Fatalf("%s %s with key %q", q.Method, q.Path, q.Key)
				}
			}
			if tg := px.Targets(); len(tg) < 2 || slices.ContainsFunc(tg, func(s string) bool { return s != name }) {
				t.Fatalf("the proxy was asked for %v", tg)
			}
			if log := e.agentrun(nil, "logs", "--events", d.ID).stdout; !strings.Contains(log, "model traffic to https://"+name+" goes through the proxy "+px.URL) {
				t.Fatalf("the journal does not say the proxy:\n%s", log)
			}
			assertNoKeyOnDisk(t, e)
		})
	}
}

// TestEgressThroughCompanyProxy: behind a company proxy (HTTP_PROXY and
// HTTPS_PROXY in the user's environment), what a run's allowlist admits
// goes out through that proxy, as the user's own tools do: a forwarded
// http:// request in absolute form, an https:// tunnel by CONNECT. The
// destinations (documentation addresses, reachable only through the
// proxy) are named by address, so that nothing depends on this machine's
// DNS, and one by a name only the proxy resolves, as behind a company
// proxy whose network's DNS knows only its own names; what the allowlist
// does not admit never reaches the proxy.
func TestEgressThroughCompanyProxy(t *testing.T) {
	e := newEnv(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "through the company proxy "+r.URL.Path+"\n")
	}))
	t.Cleanup(origin.Close)
	tlsOrigin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tunnelled "+r.URL.Path+"\n")
	}))
	t.Cleanup(tlsOrigin.Close)
	px := testsupport.NewForwardProxy(t, map[string]string{
		"192.0.2.10:80": origin.Listener.Addr().String(), "192.0.2.11:443": tlsOrigin.Listener.Addr().String(),
		"pkg.corp.invalid:443": tlsOrigin.Listener.Addr().String()})
	env := []string{"HTTP_PROXY=" + px.URL, "HTTPS_PROXY=" + px.URL}
	check := `curl -sSf --max-time 10 http://192.0.2.10/pkg > plain.txt && curl -sSfk --max-time 10 https://192.0.2.11/pkg > tls.txt && ` +
		`curl -sSfk --max-time 10 https://pkg.corp.invalid/named > named.txt && ! curl -sSf --max-time 5 http://192.0.2.12/ 2>/dev/null`
	d, res := e.submitJSON(env, "--sandbox", "native", "--allow", "192.0.2.10:80", "--allow", "192.0.2.11:443", "--allow", "pkg.corp.invalid",
		"--agent-cmd", check, "--attempts", "1", "--wait", "fetch through the proxy")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	if res.code != 0 {
		t.Fatalf("exit %d: %s %s\n%s\nproxy: %v\nagent: %s\negress: %s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID), px.Targets(),
			e.run("logs", d.ID).stdout, e.run("egress", d.ID).stdout)
	}
	if got, _ := resultFile(e, d.Commit, "plain.txt"); got != "through the company proxy /pkg" {
		t.Fatalf("plain.txt %q", got)
	}
	if got, _ := resultFile(e, d.Commit, "tls.txt"); got != "tunnelled /pkg" {
		t.Fatalf("tls.txt %q", got)
	}
	// A name only the proxy resolves (pkg.corp.invalid resolves nowhere
	// but there) is left to it.
	if got, _ := resultFile(e, d.Commit, "named.txt"); got != "tunnelled /named" {
		t.Fatalf("named.txt %q", got)
	}
	if got := px.Targets(); !slices.Equal(got, []string{"192.0.2.10:80", "192.0.2.11:443", "pkg.corp.invalid:443"}) {
		t.Fatalf("the proxy was asked for %v", got)
	}
	eg := e.run("egress", d.ID)
	if !strings.Contains(eg.stdout, "(via "+px.URL+")") || !strings.Contains(eg.stdout, "192.0.2.12:80") {
		t.Fatalf("egress:\n%s", eg.stdout)
	}

	// An https:// proxy, its certificate from the company's authority,
	// which NODE_EXTRA_CA_CERTS names (as for the user's CLIs).
	ca := testsupport.NewPrivateCA(t)
	caFile := filepath.Join(e.root, "corp-ca.pem")
	if err := os.WriteFile(caFile, ca.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	tlsPx := testsupport.NewTLSForwardProxy(t, map[string]string{"pkg.corp.invalid:443": tlsOrigin.Listener.Addr().String()}, ca)
	d, res = e.submitJSON([]string{"HTTPS_PROXY=" + tlsPx.URL, "NODE_EXTRA_CA_CERTS=" + caFile}, "--sandbox", "native", "--allow", "pkg.corp.invalid",
		"--agent-cmd", "curl -sSfk --max-time 10 https://pkg.corp.invalid/over-tls > over-tls.txt", "--attempts", "1", "--wait", "fetch through the https proxy")
	if res.code != 0 {
		t.Fatalf("through an https proxy: exit %d: %s %s\nagent: %s\negress: %s", res.code, res.stdout, res.stderr,
			e.run("logs", d.ID).stdout, e.run("egress", d.ID).stdout)
	}
	if got, _ := resultFile(e, d.Commit, "over-tls.txt"); got != "tunnelled /over-tls" {
		t.Fatalf("over-tls.txt %q", got)
	}
	if got := tlsPx.Targets(); !slices.Equal(got, []string{"pkg.corp.invalid:443"}) {
		t.Fatalf("the https proxy was asked for %v", got)
	}
}

// TestAllowHostLoopback: a service on this machine's loopback that
// --allow 127.0.0.1:PORT admits (a local registry, a database) is reached
// from inside the native sandbox at that same address, by any client
// (curl directly, NO_PROXY keeping loopback direct, and bash's /dev/tcp),
// through the egress proxy, which journals it; another port of the host's
// loopback stays out of reach. As root, where this machine can listen on
// one, a service on a port below 1024 is reached too (the sandbox side of
// such a port, as any user, is the conformance case egress/host-loopback).
// An entry the sandbox cannot listen for at its address is accepted with
// a warning that says so.
func TestAllowHostLoopback(t *testing.T) {
	e := newEnv(t)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the host's service "+r.URL.Path+"\n")
	}))
	t.Cleanup(svc.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "unreachable\n") }))
	t.Cleanup(other.Close)
	addr, otherAddr := svc.Listener.Addr().String(), other.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_, otherPort, _ := net.SplitHostPort(otherAddr)
	check := `curl -sSf --max-time 10 http://` + addr + `/pkg > got.txt && ` +
		`bash -c 'exec 3<>/dev/tcp/127.0.0.1/` + port + ` && printf "GET /raw HTTP/1.0\r\n\r\n" >&3 && tail -n 1 <&3' > raw.txt && ` +
		`! curl -sSf --max-time 5 http://` + otherAddr + `/ 2>/dev/null`
	args := []string{"--sandbox", "native", "--allow", addr, "--allow", "[::1]:5432"}
	low := ""
	if os.Geteuid() == 0 {
		low = lowPortService(t, "the host's low port service")
		args = append(args, "--allow", low)
		check += ` && curl -sSf --max-time 10 http://` + low + `/ > low.txt`
	}
	d, res := e.submitJSON(nil, append(args, "--agent-cmd", check, "--attempts", "1", "--wait", "reach the host's service")...)
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	if res.code != 0 {
		t.Fatalf("exit %d: %s %s\nagent: %s\negress: %s", res.code, res.stdout, res.stderr, e.run("logs", d.ID).stdout, e.run("egress", d.ID).stdout)
	}
	if !strings.Contains(res.stderr, "--allow [::1]:5432 names this machine's loopback") {
		t.Errorf("no warning for [::1]:5432 alone (the forwarded entries are not warned of):\n%s", res.stderr)
	}
	if got, _ := resultFile(e, d.Commit, "got.txt"); got != "the host's service /pkg" {
		t.Fatalf("got.txt %q", got)
	}
	if got, _ := resultFile(e, d.Commit, "raw.txt"); got != "the host's service /raw" {
		t.Fatalf("raw.txt %q", got)
	}
	if low != "" {
		if got, _ := resultFile(e, d.Commit, "low.txt"); got != "the host's low port service" {
			t.Fatalf("low.txt %q", got)
		}
	}
	eg := e.run("egress", d.ID).stdout
	if !strings.Contains(eg, "allowed") || !strings.Contains(eg, addr) || strings.Contains(eg, otherPort) || !strings.Contains(eg, low) {
		t.Fatalf("egress:\n%s", eg)
	}
}

// lowPortService serves body on a free port of 127.0.0.1 below 1024 (as
// root) and returns its address.
func lowPortService(t *testing.T, body string) string {
	t.Helper()
	for p := 1023; p >= 900; p-- {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body+"\n") })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	t.Fatal("no free port of 127.0.0.1 between 900 and 1023")
	return ""
}
