package e2e

import (
	"os"
	"path/filepath"
	"strings"
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
			t.Parallel()
			bin := agenttest.CLI(t, p.name, p.binary)
			e := newEnv(t)
			if sandboxes(t, e)[0] != "native" {
				return // (requireCaps failed or skipped the test)
			}
			srv := e.scriptedServer(p.script, "")
			pathEnv := "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")
			start := time.Now()
			check := `test "$(cat hello.txt)" = 'hello from the model' && ! grep -rqsE '` + keyPattern + `' /proc/[0-9]*/environ "$HOME" /tmp .`
			d, res := e.submitJSON([]string{pathEnv, "SCRIPTED_KEY=" + realKey}, "--agent", p.name, "--model", "test-model",
				"--model-server", "scripted", "--attempts", "1", "--timeout", "3m", "--check", "hello="+check, "--wait", "Write hello.txt")
			took := time.Since(start)
			if res.code != 0 {
				log, _ := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "attempts", "1", "agent.log"))
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
