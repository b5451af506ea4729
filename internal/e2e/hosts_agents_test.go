package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestHostRunsItsOwnCLI: on a team whose runs go to agent hosts, the
// claude profile's CLI is on one host's PATH only, not the server's (nor
// the other host's). Before that host joins, a submit is refused
// (agent_missing, nothing made); once it has claimed, the run is taken,
// goes to that host only, and the real claude CLI found on the host's
// own PATH runs in the host's native sandbox with --network none through
// the gateway, with the server's key (sealed to the host), and lands its
// change on the branch.
func TestHostRunsItsOwnCLI(t *testing.T) {
	bin, e, ok := profileEnv(t, "claude", "claude")
	if !ok {
		return
	}
	content := "hello from the host\n"
	model := e.scriptedServer(modelserver.WriteFileIn("/workspace", "hello.txt", content), "")
	own := e.vars
	e.vars = append(slices.Clone(own), "SCRIPTED_KEY="+realKey)
	tm := teamOn(e, t, sqltest.Targets[0], 0, hostTTL)
	e.vars = own // the CLI and the hosts do not have the key
	tm.backend = "native"
	args := []string{"--sandbox", "native", "--agent", "claude", "--model", "test-model", "--model-server", "scripted",
		"--attempts", "1", "--timeout", "3m", "Write hello.txt"}

	_, res := e.submitJSON(tm.srv, args...)
	if res.code != 2 || !strings.Contains(res.stdout, "agent_missing") || !strings.Contains(res.stdout, "any agent host") {
		t.Fatalf("submit with claude on no PATH: exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	h1 := tm.startHost(tm.url) // host1: no claude, no tools
	// host2's own tool, outside every directory a sandbox shows.
	tools := toolDir(t, "host2-tool", "#!/bin/sh\necho \"from host2's tool\" > tool.txt\n")
	e.vars = append(slices.Clone(own), "PATH="+filepath.Dir(bin)+":"+tools+":"+os.Getenv("PATH"))
	h2 := tm.startHost(tm.url)
	e.vars = own
	if !strings.Contains(h2.output(), "agent CLIs claude") {
		tm.waitFor("host2 to name its agent CLIs", func() bool { return strings.Contains(h2.output(), "agent CLIs claude") })
	}

	d, res := tm.submitOnceTaken("the server to hear that host2 has claude", args...)
	var list struct {
		Hosts []struct {
			Name   string   `json:"name"`
			Agents []string `json:"agents"`
		} `json:"hosts"`
	}
	res = tm.admin("hosts", "--json")
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil || len(list.Hosts) != 2 ||
		list.Hosts[0].Agents == nil || len(list.Hosts[0].Agents) != 0 || !slices.Equal(list.Hosts[1].Agents, []string{"claude"}) {
		t.Fatalf("hosts: %v %s", err, res.stdout)
	}
	if res := tm.admin("hosts"); !strings.Contains(res.stdout, "AGENT CLIS") || !strings.Contains(res.stdout, " claude ") {
		t.Errorf("the host list shows no agent CLIs:\n%s", res.stdout)
	}
	tm.succeededOn(d.ID, h2)
	// The server's record keeps the profile's name, not where host2's
	// PATH had the CLI, nor what that needed visible.
	var rec struct {
		Agent struct {
			Binary string `json:"binary"`
		} `json:"agent"`
		Sandbox struct {
			ReadOnly []string `json:"read_only_paths"`
		} `json:"sandbox"`
	}
	res = e.agentrun(tm.srv, "status", "--json", d.ID)
	if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil || rec.Agent.Binary != "claude" || len(rec.Sandbox.ReadOnly) != 0 {
		t.Fatalf("the server's record: %+v %v\n%s", rec, err, res.stdout)
	}
	res = e.agentrun(tm.srv, "result", "--json", d.ID)
	if res.code != 0 {
		t.Fatalf("result: %s %s", res.stdout, res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+d.ID+":hello.txt"); got != strings.TrimSpace(content) {
		t.Fatalf("hello.txt on the branch: %q", got)
	}
	reqs := model.ModelRequests(modelserver.Anthropic)
	if len(reqs) == 0 {
		t.Fatal("the model server got no request")
	}
	for _, q := range model.Requests() {
		if q.Key != realKey {
			t.Fatalf("%s %s reached the model server with key %q", q.Method, q.Path, q.Key)
		}
	}
	assertNoKeyOnDisk(t, e)

	// An agent command whose program is on host2's PATH only: the server
	// takes it (its runs go to hosts), and host2 (the only host left)
	// shows the program in its sandbox, as it found it.
	_ = h1.cmd.Process.Signal(syscall.SIGTERM)
	<-h1.done
	d, res = e.submitJSON(tm.srv, "--sandbox", "native", "--agent-cmd", "host2-tool", "--attempts", "1", "Run the tool")
	if res.code != 0 {
		t.Fatalf("submit of host2's tool: exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	if got := tm.waitEnded(d.ID); got.Status != "succeeded" {
		t.Fatalf("run %s: %s/%s\n%s", d.ID, got.Status, got.Reason, h2.output())
	}
	if res := e.agentrun(tm.srv, "result", "--json", d.ID); res.code != 0 {
		t.Fatalf("result: %s %s", res.stdout, res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+d.ID+":tool.txt"); got != "from host2's tool" {
		t.Fatalf("tool.txt on the branch: %q", got)
	}
}

// TestLocalWorkerLeavesHostProgram: on a team server that runs a worker
// of its own, an agent command whose program is on an agent host's PATH
// only (not the server's) is refused while no host is enrolled; once one
// is, it is taken with a warning that says the run goes to a host, the
// server's own worker leaves it, and the host runs its program.
func TestLocalWorkerLeavesHostProgram(t *testing.T) {
	e := newEnv(t)
	tm := teamOn(e, t, sqltest.Targets[0], 1, hostTTL)
	tm.backend = "native"
	args := []string{"--sandbox", "native", "--agent-cmd", "host-only-tool", "--attempts", "1", "Run the tool"}
	_, res := e.submitJSON(tm.srv, args...)
	if res.code != 2 || !strings.Contains(res.stdout, "agent_missing") {
		t.Fatalf("submit with the program on no PATH and no host: exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	tools := toolDir(t, "host-only-tool", "#!/bin/sh\necho \"from the host's tool\" > tool.txt\n")
	own := e.vars
	e.vars = append(slices.Clone(own), "PATH="+tools+":"+os.Getenv("PATH"))
	h := tm.startHost(tm.url)
	e.vars = own
	d, res := tm.submitOnceTaken("the host to enrol", args...)
	if !strings.Contains(res.stderr, `the agent command's program "host-only-tool" is not on this server's PATH: the run goes to an agent host`) {
		t.Errorf("no warning that the run goes to a host:\n%s", res.stderr)
	}
	tm.succeededOn(d.ID, h) // (not the server's own worker)
	if res := e.agentrun(tm.srv, "result", "--json", d.ID); res.code != 0 {
		t.Fatalf("result: %s %s", res.stdout, res.stderr)
	}
	if got := testsupport.Git(t, e.repo, "show", "agentrun/"+d.ID+":tool.txt"); got != "from the host's tool" {
		t.Fatalf("tool.txt on the branch: %q", got)
	}
}

// submitOnceTaken submits args to the team until the server takes the
// run (it refuses it with agent_missing until what it waits for, named
// by what, has happened).
func (tm *team) submitOnceTaken(what string, args ...string) (submitDoc, result) {
	tm.e.t.Helper()
	var d submitDoc
	var res result
	tm.waitFor(what, func() bool {
		d, res = tm.e.submitJSON(tm.srv, args...)
		if res.code != 0 && !strings.Contains(res.stdout, "agent_missing") {
			tm.e.t.Fatalf("submit: exit %d %s %s", res.code, res.stdout, res.stderr)
		}
		return res.code == 0
	})
	return d, res
}

// succeededOn waits for run id to end and fails the test unless it
// succeeded, taken by host h alone.
func (tm *team) succeededOn(id string, h *agentHost) {
	tm.e.t.Helper()
	if got := tm.waitEnded(id); got.Status != "succeeded" {
		tm.e.t.Fatalf("run %s: %s/%s\n%s", id, got.Status, got.Reason, h.output())
	}
	if cs := tm.claims(id); len(cs) != 1 || cs[0].host != h.name {
		tm.e.t.Fatalf("run %s's claims: %+v, want %s's alone", id, cs, h.name)
	}
}

// toolDir makes a directory any user can search, holding the executable
// script name: a program on a PATH outside every directory a sandbox
// shows by itself (not under /usr), so that it must be made visible, nor
// under /tmp (bound on the sandbox's own /tmp: TestReadOnlyUnderTmp). It
// is removed at the test's end.
func toolDir(t *testing.T, name, script string) string {
	t.Helper()
	dir := testsupport.SearchableDir(t, "/var/tmp", "agentrun-tools-")
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
