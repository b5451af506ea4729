package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
)

// A real CLI (Claude Code) past its run's token budget: its first request
// (a tool call that writes first.txt) spends the budget, the gateway
// refuses the next, and the run ends failed with budget_exceeded, soon,
// whatever the CLI does with the refusal (it retries some errors for
// minutes), its workspace kept. `resume --max-tokens` with a higher
// budget continues the CLI's own session, which finishes the task: the
// branch has first.txt, and the resumed attempt's first request carries
// the first attempt's conversation.
func TestProfileBudgetExceededThenResume(t *testing.T) {
	bin, e, ok := profileEnv(t, "claude", "claude")
	if !ok {
		return // (the scripted tool call names the native sandbox's /workspace)
	}
	srv := e.scriptedServer(func(turn modelserver.Turn) modelserver.Reply {
		if turn.ToolResults == 0 {
			if c, ok := modelserver.WriteCall(turn.Tools, "/workspace", "first.txt", "x\n"); ok {
				return modelserver.Reply{Text: "writing first.txt", Calls: []modelserver.Call{c}}
			}
		}
		return modelserver.Reply{Text: "finished"}
	}, "")
	vars := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SCRIPTED_KEY=" + realKey}
	start := time.Now()
	d, res := e.submitJSON(vars, "--agent", "claude", "--model", "test-model", "--model-server", "scripted",
		"--max-tokens", "1000", "--wait", "Write first.txt")
	must(t, res, 1)
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the run took %s to end past its budget", took)
	}
	r := e.get(d.ID)
	if r.State != run.StateFailed || r.Reason != run.ReasonBudgetExceeded || !strings.Contains(r.Message, "agentrun resume") {
		t.Fatalf("%s/%s: %s\n%s", r.State, r.Reason, r.Message, e.supervisorLog(d.ID))
	}
	if n := len(srv.ModelRequests(modelserver.Anthropic)); n != 1 {
		t.Fatalf("%d requests reached the model server, want 1 (the gateway refuses the rest)", n)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "workspace", "first.txt")); err != nil || string(b) != "x\n" {
		t.Fatalf("workspace kept? first.txt %q %v", b, err)
	}
	res = e.agentrun(vars, "resume", "--json", "--wait", "--max-tokens", "10000000", d.ID)
	if res.code != 0 {
		t.Fatalf("resume: exit %d %s %s\n%s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID))
	}
	r = e.get(d.ID)
	if r.State != run.StateSucceeded || len(r.Attempts) != 2 || !r.Attempts[1].SessionContinued || r.Attempts[1].Session != r.Attempts[0].Session {
		t.Fatalf("%s attempts %+v", r.State, r.Attempts)
	}
	if got, err := resultFile(e, r.Commit, "first.txt"); err != nil || strings.TrimSpace(got) != "x" {
		t.Fatalf("first.txt %q %v", got, err)
	}
	reqs := srv.ModelRequests(modelserver.Anthropic)
	if len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), "writing first.txt") {
		t.Fatalf("the resumed attempt did not continue the first one's conversation (%d requests)", len(reqs))
	}
	for _, q := range srv.Requests() {
		if q.Key != realKey {
			t.Fatalf("%s %s reached the model server with key %q", q.Method, q.Path, q.Key)
		}
	}
	assertNoKeyOnDisk(t, e)
}

// Claude Code on a subscription: the host has CLAUDE_CODE_OAUTH_TOKEN and
// no API key. The CLI in the sandbox gets a placeholder; the gateway sends
// the token as Claude Code would (Authorization: Bearer, with the OAuth
// beta among the CLI's own betas) to the Anthropic API (here config.toml's
// [providers.anthropic] url, the scripted server), and the token is
// nowhere in the sandbox or on disk.
func TestProfileClaudeSubscriptionToken(t *testing.T) {
	bin, e, ok := profileEnv(t, "claude", "claude")
	if !ok {
		return // (the scripted tool call names the native sandbox's /workspace)
	}
	srv := modelserver.New(t, realKey, "test-model", modelserver.WriteFileIn("/workspace", "hello.txt", "hi\n"))
	e.writeConfig(fmt.Sprintf("[providers.anthropic]\nurl = %q\n", srv.URL))
	check := `test -f hello.txt && ! grep -rqsE '` + keyPattern + `' /proc/[0-9]*/environ "$HOME" /tmp .`
	d, res := e.submitJSON([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "CLAUDE_CODE_OAUTH_TOKEN=" + realKey,
		"ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN="}, "--agent", "claude", "--model", "test-model", "--attempts", "1",
		"--check", "hello="+check, "--wait", "Write hello.txt")
	if res.code != 0 {
		t.Fatalf("exit %d %s %s\n%s", res.code, res.stdout, res.stderr, e.supervisorLog(d.ID))
	}
	reqs := srv.ModelRequests(modelserver.Anthropic)
	if len(reqs) == 0 {
		t.Fatal("no request reached the model server")
	}
	for _, q := range reqs {
		if q.Key != realKey || q.Header.Get("Authorization") != "Bearer "+realKey || q.Header.Get("X-Api-Key") != "" ||
			!strings.Contains(q.Header.Get("Anthropic-Beta"), "oauth-2025-04-20") {
			t.Fatalf("%s %s: key %q, authorization %q, x-api-key %q, betas %q", q.Method, q.Path, q.Key,
				q.Header.Get("Authorization"), q.Header.Get("X-Api-Key"), q.Header.Get("Anthropic-Beta"))
		}
	}
	if r := e.get(d.ID); r.Usage == nil || r.Usage.Requests == 0 {
		t.Fatalf("usage %+v", r.Usage)
	}
	assertNoKeyOnDisk(t, e)
}

// A real CLI stopped in the middle of a command it runs with its shell
// tool: codex by `agentrun cancel`, claude by kill -9 of the run's
// supervisor (the sandbox dies with it; the next command finds the run
// interrupted). Either way, the real key is nowhere on disk afterwards:
// not in the run's HOME, where codex keeps its shell snapshots (the
// original leak), nor in the workspace, transcripts or logs; the sandbox
// saw only the placeholder.
func TestProfileStoppedMidCommandLeavesNoKey(t *testing.T) {
	for _, tc := range []struct{ name, stop string }{{"codex", "cancel"}, {"claude", "kill -9"}} {
		t.Run(tc.name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, tc.name, tc.name)
			if !ok {
				return
			}
			srv := e.scriptedServer(func(turn modelserver.Turn) modelserver.Reply {
				if c, ok := modelserver.ShellCall(turn.Tools, `env > "$HOME/env-snapshot.sh"; echo started > started.txt; sleep 120`); ok && turn.ToolResults == 0 {
					return modelserver.Reply{Text: "running it", Calls: []modelserver.Call{c}}
				}
				return modelserver.Reply{Text: "done"}
			}, "")
			d, res := e.submitJSON([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SCRIPTED_KEY=" + realKey},
				"--agent", tc.name, "--model", "test-model", "--model-server", "scripted", "--attempts", "1", "Run it")
			must(t, res, 0)
			r := e.waitFor(d.ID, "the agent's command to start", func(r *run.Run) bool {
				return r.State == run.StateRunning && fileExists(filepath.Join(e.home, "runs", d.ID, "workspace", "started.txt"))
			})
			start := time.Now()
			want := run.StateCancelled
			if tc.stop == "cancel" {
				must(t, e.run("cancel", d.ID), 0)
			} else {
				if err := syscallKill(r.Supervisor.PID); err != nil {
					t.Fatal(err)
				}
				want = run.StateInterrupted
			}
			e.waitFor(d.ID, tc.stop, func(r *run.Run) bool {
				if tc.stop != "cancel" {
					_ = e.run("status", "--json", d.ID) // reconciles the run once its supervisor is gone
				}
				return r.State == want
			})
			if took := time.Since(start); took > 30*time.Second {
				t.Fatalf("%s took %s", tc.stop, took)
			}
			// (codex leaves its key variables out of its commands'
			// environment; claude's has the placeholder.)
			snap, err := os.ReadFile(filepath.Join(e.home, "runs", d.ID, "home", "env-snapshot.sh"))
			if err != nil || (tc.name == "claude" && !strings.Contains(string(snap), "agentrun-gateway-")) {
				t.Fatalf("the agent's snapshot of its environment: %v\n%s", err, snap)
			}
			if len(srv.ModelRequests("")) == 0 {
				t.Fatal("no model request reached the server")
			}
			assertNoKeyOnDisk(t, e)
		})
	}
}
