package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agenttest"
	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// Each profile's CLI runs a command with its own shell tool (claude's
// Bash, gemini's and qwen's run_shell_command, opencode's bash, codex's
// exec_command) in the native sandbox with --network none: a real task's
// builds and tests go that way, not through a write-file tool. The command
// uses the shell (pipes, a redirection) and git, in the
// workspace; what it printed reaches the model in the tool's result, and
// the file it wrote is on the run's branch.
func TestProfilesRunShellCommands(t *testing.T) {
	// (No $(...): Gemini CLI refuses a command with a substitution.)
	const command = `expr 6 '*' 7 | sed 's/^/shell says /'; git rev-parse --is-inside-work-tree | tr a-z A-Z > shell.txt`
	for _, name := range []string{"claude", "codex", "gemini", "qwen", "opencode"} {
		t.Run(name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, name, name)
			if !ok {
				return
			}
			var offered atomic.Value // the tool names of the first turn
			var answered atomic.Bool // a later turn carried the command's output
			srv := e.scriptedServer(func(turn modelserver.Turn) modelserver.Reply {
				if turn.ToolResults == 0 {
					offered.CompareAndSwap(nil, toolNames(turn.Tools))
					if c, ok := modelserver.ShellCall(turn.Tools, command); ok {
						return modelserver.Reply{Text: "I will run it.", Calls: []modelserver.Call{c}}
					}
					return modelserver.Reply{Text: "I have no shell tool."}
				}
				if bytes.Contains(turn.Body, []byte("shell says 42")) {
					answered.Store(true)
				}
				return modelserver.Reply{Text: "Done."}
			}, "")
			d, res := e.submitProfile(bin, name, "Run the command")
			if res.code != 0 {
				log := e.agentLog(d.ID)
				t.Fatalf("exit %d: %s %s\nagent.log:\n%s\nrequests: %d", res.code, res.stdout, res.stderr, log, len(srv.Requests()))
			}
			if got := testsupport.Git(t, e.repo, "show", d.Commit+":shell.txt"); got != "TRUE" {
				t.Fatalf("shell.txt = %q (the tools offered: %v)", got, offered.Load())
			}
			if !answered.Load() {
				t.Fatalf("no model request after the command carried its output (%d requests)", len(srv.Requests()))
			}
			assertNoKeyOnDisk(t, e)
		})
	}
}

// A later attempt continues the CLI's own session, in the sandbox, for
// every profile that has sessions (claude: TestProfileSessionContinues
// AcrossAttempts): the first attempt writes first.txt and the check that
// wants second.txt fails; the second attempt's request carries the first
// attempt's conversation, and writes second.txt.
func TestProfilesContinueTheirSessions(t *testing.T) {
	for _, name := range []string{"codex", "gemini", "qwen", "opencode"} {
		t.Run(name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, name, name)
			if !ok {
				return
			}
			var wrote atomic.Int32
			srv := e.scriptedServer(twoAttempts(&wrote, func(turn modelserver.Turn, file string) (modelserver.Reply, bool) {
				return writeReply(turn, file, "x\n")
			}), "")
			d, res := e.submitJSON([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SCRIPTED_KEY=" + realKey},
				"--agent", name, "--model", "test-model", "--model-server", "scripted", "--attempts", "2", "--timeout", "3m",
				"--check", "second=test -f second.txt", "--wait", "Write first.txt")
			if res.code != 0 {
				t.Fatalf("exit %d %s\n%s", res.code, res.stdout, e.supervisorLog(d.ID))
			}
			r := e.get(d.ID)
			if len(r.Attempts) != 2 || r.Attempts[0].SessionContinued || !r.Attempts[1].SessionContinued {
				t.Fatalf("attempts %+v", r.Attempts)
			}
			var second []byte
			for _, q := range srv.ModelRequests("") {
				if bytes.Contains(q.Body, []byte("these checks failed")) {
					second = q.Body
					break
				}
			}
			if second == nil || !bytes.Contains(second, []byte("writing first.txt")) {
				t.Fatalf("the second attempt did not continue the first one's conversation")
			}
			for _, f := range []string{"first.txt", "second.txt"} {
				if _, err := resultFile(e, r.Commit, f); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// With an allowlist (--allow: the sandbox's proxy variables point at the
// egress proxy), each CLI still reaches its model through the gateway on
// the sandbox's loopback, not through the egress proxy, which would refuse
// a loopback address: the model needs no --allow. And nothing else goes
// out either: the profiles turn the CLIs' telemetry and update checks off.
func TestProfilesWithAllowlist(t *testing.T) {
	for _, name := range []string{"claude", "codex", "gemini", "qwen", "opencode"} {
		t.Run(name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, name, name)
			if !ok {
				return
			}
			srv := e.scriptedServer(func(turn modelserver.Turn) modelserver.Reply {
				if turn.ToolResults == 0 {
					if r, ok := writeReply(turn, "hello.txt", "hi\n"); ok {
						return r
					}
				}
				return modelserver.Reply{Text: "Done: hello.txt is written."}
			}, "")
			d, res := e.submitProfile(bin, name, "Write hello.txt", "--allow", "example.com")
			if res.code != 0 {
				log := e.agentLog(d.ID)
				t.Fatalf("exit %d: %s %s\nagent.log:\n%s\nrequests: %d", res.code, res.stdout, res.stderr, log, len(srv.Requests()))
			}
			if r := e.get(d.ID); r.Sandbox.Network != "allowlist" {
				t.Fatalf("network %q", r.Sandbox.Network)
			}
			if got := testsupport.Git(t, e.repo, "show", d.Commit+":hello.txt"); got != "hi" {
				t.Fatalf("hello.txt = %q", got)
			}
			// Nothing went through the egress proxy: not the model's
			// traffic, and no telemetry or update check (the profiles turn
			// them off).
			out := e.run("egress", "--json", d.ID)
			var eg struct {
				Allowed, Denied []struct{ Host string }
			}
			if err := json.Unmarshal([]byte(out.stdout), &eg); err != nil || len(eg.Allowed)+len(eg.Denied) != 0 {
				t.Fatalf("egress: %v\n%s", err, out.stdout)
			}
		})
	}
}

// Five real CLIs at once against one model server that serves one request
// at a time (max_concurrent = 1): the runs' gateways share the slot, and
// the CLIs wait their turn (no retry storm, no client timeout) while the
// first request holds it until two more wait; every run succeeds, and the
// waits are journaled.
func TestProfilesShareModelServerCapacity(t *testing.T) {
	t.Parallel()
	names := []string{"claude", "codex", "gemini", "qwen", "opencode"}
	path := os.Getenv("PATH")
	for _, name := range names {
		path = filepath.Dir(agenttest.CLI(t, name, name)) + ":" + path
	}
	e := newEnv(t)
	if sandboxes(t, e)[0] != "native" {
		return // (the scripted tool calls name the native sandbox's /workspace)
	}
	// waiting counts the requests that wait for a slot: each has a
	// waiter file in the capacity's directory (gateway.FlockCapacity).
	waiting := func() int {
		m, _ := filepath.Glob(filepath.Join(e.home, "capacity", "*", "wait-*"))
		return len(m)
	}
	var inFlight, peak atomic.Int32
	var first sync.Once
	srv := e.scriptedServer(func(turn modelserver.Turn) modelserver.Reply {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		first.Do(func() {
			for deadline := time.Now().Add(2 * time.Minute); waiting() < 2 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
		})
		time.Sleep(100 * time.Millisecond)
		inFlight.Add(-1)
		if turn.ToolResults == 0 {
			if r, ok := writeReply(turn, "hello.txt", "hi\n"); ok {
				return r
			}
		}
		return modelserver.Reply{Text: "Done: hello.txt is written."}
	}, "max_concurrent = 1\n")
	var ids []string
	for _, name := range names {
		d, res := e.submitJSON([]string{"PATH=" + path, "SCRIPTED_KEY=" + realKey}, "--agent", name, "--model", "test-model",
			"--model-server", "scripted", "--attempts", "1", "--timeout", "5m", "Write hello.txt")
		must(t, res, 0)
		ids = append(ids, d.ID)
	}
	waits := 0
	for i, id := range ids {
		r := e.waitFor(id, "the end", func(r *run.Run) bool { return r.State.Terminal() })
		if r.State != run.StateSucceeded {
			log := e.agentLog(id)
			t.Fatalf("%s (%s): %s/%s %s\nagent.log:\n%s", names[i], id, r.State, r.Reason, r.Message, log)
		}
		if hasGatewayEvent(t, e, id, "capacity_wait") {
			waits++
		}
	}
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d requests were in flight at once, max_concurrent is 1", p)
	}
	t.Logf("%d of %d runs waited for the slot", waits, len(names))
	// At least the two that the first request held up waited.
	if waits < 2 {
		t.Fatalf("%d runs journaled a capacity_wait, want 2 or more (%d model requests)", waits, len(srv.ModelRequests("")))
	}
}

// Each CLI searches the workspace in the sandbox the way its model is
// offered to: gemini's search_file_content, qwen's grep_search (their
// ripgrep or a fallback), opencode's grep, and claude's and codex's
// shells (rg where there is one: claude carries its own and offers no
// search tool until the model asks for one; codex finds one where the
// machine has it, as bare; else grep). The repository has a file,
// needle.txt, with a marker; the agent searches for the marker, and the
// search's result, with the matching line (which the conversation has
// nowhere else: the pattern is only the marker), reaches the model.
// opencode's grep runs the system's rg (.ci/run installs Debian's
// ripgrep): it needs one on PATH or in its data directory, and downloads
// one from GitHub otherwise, which no sandbox without network can.
func TestProfilesSearchTheWorkspace(t *testing.T) {
	const marker = "needle-5f3a9c"
	for _, name := range []string{"claude", "codex", "gemini", "qwen", "opencode"} {
		t.Run(name, func(t *testing.T) {
			bin, e, ok := profileEnv(t, name, name)
			if !ok {
				return
			}
			found, offered, srv := e.searchNeedle(marker)
			d, res := e.submitProfile(bin, name, "Find the needle")
			if res.code != 1 || d.Reason != "no_changes" {
				t.Fatalf("exit %d, want 1 (no_changes): %s %s (%d requests)", res.code, res.stdout, res.stderr, len(srv.Requests()))
			}
			if !found() {
				t.Fatalf("the search's result did not reach the model (tools: %v)\nagent.log:\n%s", offered(), e.agentLog(d.ID))
			}
		})
	}
}

// searchNeedle commits needle.txt, a line holding marker, to e's
// repository and starts the scripted model server of a model that
// searches the workspace for marker with the CLI's search tool (or its
// shell's rg, else grep), then says it is done. found reports whether
// the matching line reached the model (the pattern alone does not hold
// it), offered the tools of the first request.
func (e *env) searchNeedle(marker string) (found func() bool, offered func() string, srv *modelserver.Server) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.repo, "needle.txt"), []byte("a line with "+marker+"\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	testsupport.Git(e.t, e.repo, "add", "needle.txt")
	testsupport.Git(e.t, e.repo, "commit", "-qm", "needle")
	var tools atomic.Value
	var seen atomic.Bool
	srv = e.scriptedServer(func(turn modelserver.Turn) modelserver.Reply {
		if turn.ToolResults == 0 {
			tools.CompareAndSwap(nil, toolNames(turn.Tools))
			if c, ok := searchCall(turn.Tools, marker); ok {
				return modelserver.Reply{Text: "searching", Calls: []modelserver.Call{c}}
			}
			if c, ok := modelserver.ShellCall(turn.Tools, "rg -n "+marker+" . || grep -rn "+marker+" ."); ok {
				return modelserver.Reply{Text: "searching with rg", Calls: []modelserver.Call{c}}
			}
		} else if bytes.Contains(turn.Body, []byte("a line with "+marker)) {
			seen.Store(true)
		}
		return modelserver.Reply{Text: "done"}
	}, "")
	return seen.Load, func() string { s, _ := tools.Load().(string); return s }, srv
}

// searchCall builds a call of a content-search tool among tools (claude's
// Grep when offered, gemini's search_file_content, qwen's grep_search,
// opencode's grep) for pattern in the workspace, asking for the matching
// lines where the tool can give only the files' names.
func searchCall(tools []modelserver.Tool, pattern string) (modelserver.Call, bool) {
	for _, want := range []string{"Grep", "search_file_content", "grep_search", "grep"} {
		for _, t := range tools {
			if t.Name != want {
				continue
			}
			props, _ := t.Schema["properties"].(map[string]any)
			if _, ok := props["pattern"]; !ok {
				continue
			}
			args := map[string]any{"pattern": pattern}
			if _, ok := props["output_mode"]; ok {
				args["output_mode"] = "content"
			}
			for _, k := range []string{"path", "dir_path"} {
				if _, ok := props[k]; ok {
					args[k] = "/workspace"
					break
				}
			}
			return modelserver.Call{Name: t.Name, Args: args}, true
		}
	}
	return modelserver.Call{}, false
}

// writeReply is the reply that writes file with content through the CLI's
// write tool (at the native sandbox's /workspace), or, for a CLI without
// one (codex), its patch or shell tool; ok is false when it has none.
func writeReply(turn modelserver.Turn, file, content string) (modelserver.Reply, bool) {
	if c, ok := modelserver.WriteCall(turn.Tools, "/workspace", file, content); ok {
		return modelserver.Reply{Text: "writing " + file, Calls: []modelserver.Call{c}}, true
	}
	r := modelserver.ShellWriteFile(file, content)(modelserver.Turn{Tools: turn.Tools})
	r.Text = "writing " + file
	return r, len(r.Calls) > 0
}

// toolNames lists the names of tools, for a failure's message.
func toolNames(tools []modelserver.Tool) string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return strings.Join(names, " ")
}

// submitProfile submits task to profile name's CLI at bin (--wait, one
// attempt) against the scripted model server, with args added.
func (e *env) submitProfile(bin, name, task string, args ...string) (submitDoc, result) {
	e.t.Helper()
	return e.submitJSON([]string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "SCRIPTED_KEY=" + realKey},
		append([]string{"--agent", name, "--model", "test-model", "--model-server", "scripted", "--attempts", "1", "--timeout", "3m", "--wait", task}, args...)...)
}
