package server_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestHostAgents: with the runs on agent hosts only (no local worker),
// a profile whose CLI is not on the server's PATH is taken at submit once
// an agent host has said, in a claim, that its PATH has it (before, the
// submit is refused, agent_missing); the run goes only to a host that
// has it, and while none does, its status says so. The server's record
// keeps the profile's bare name: the host finds the CLI on its own PATH.
func TestHostAgents(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--local-worker", "0"}
		c.env = []string{"ANTHROPIC_API_KEY=sk-ant-server"}
		srv := start(t, c)
		// (The run needs the server's key: its hosts have sealing keys.)
		_, a1 := enrolWithKey(t, srv, c, "a1", sealKey(t))
		_, b1 := enrolWithKey(t, srv, c, "b1", sealKey(t))
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		claude := map[string]any{"task": "fix it", "agent": "claude", "sandbox": "host"}
		claim := func(cred string, agents []string, waitMS int) map[string]any {
			t.Helper()
			a := srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "agents": agents, "wait_ms": waitMS})
			if a.status != http.StatusOK {
				t.Fatalf("claim: %d %s", a.status, a.body)
			}
			r, _ := a.doc(t)["run"].(map[string]any)
			return r
		}

		a := srv.submit(t, claude, bundleOf(t, repo))
		if a.status == http.StatusCreated || !strings.Contains(string(a.body), "agent_missing") || !strings.Contains(string(a.body), "any agent host") {
			t.Fatalf("submit with no host that has claude: %d %s", a.status, a.body)
		}
		claim(a1, []string{}, 10)
		claim(b1, []string{"claude", "codex"}, 10)
		id := srv.runID(t, claude, bundleOf(t, repo))
		if r := claim(a1, []string{"codex"}, 500); r != nil {
			t.Fatalf("a host without claude was given its run: %v", r["id"])
		}
		if d := srv.get(t, "/v1/runs/{id}", id).doc(t); d["waiting"] != nil || d["status"] != "queued" {
			t.Errorf("with a host that has claude: waiting %v, status %v", d["waiting"], d["status"])
		}
		if r := claim(b1, []string{}, 500); r != nil { // its claude is gone
			t.Fatalf("a host whose claude is gone was given its run: %v", r["id"])
		}
		want := "no agent host that can execute it has the claude CLI on its PATH: install it on one (its next claim says so)"
		if d := srv.get(t, "/v1/runs/{id}", id).doc(t); d["waiting"] != want {
			t.Errorf("waiting: %q, want %q", d["waiting"], want)
		}
		r := claim(b1, []string{"claude"}, 5000)
		if r == nil || r["id"] != id {
			t.Fatalf("the host with claude: %v", r)
		}
		if ag, _ := r["agent"].(map[string]any); ag["binary"] != "claude" {
			t.Errorf("the run's agent as the server keeps it: %v", r["agent"])
		}
	})
}

// TestHostsReachTheModelServer: with the runs on agent hosts only, a
// model server the server's own network does not reach is not refused at
// submit (the hosts' may reach it: the run's first request finds out);
// with a local worker, which runs on the server's network, it is
// (model_unreachable).
func TestHostsReachTheModelServer(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		unreachable := spec("fix it", "true", map[string]any{"model_server": "http://127.0.0.1:9", "model": "m"})
		local := start(t, c)
		if a := local.submit(t, unreachable, bundleOf(t, repo)); a.status == http.StatusCreated || !strings.Contains(string(a.body), "model_unreachable") {
			t.Fatalf("with a local worker: %d %s", a.status, a.body)
		}
		local.stop(syscall.SIGTERM)
		c.extra = []string{"--local-worker", "0"}
		hosts := start(t, c)
		hosts.runID(t, unreachable, bundleOf(t, repo))
	})
}

// TestLocalWorkerLeavesHostPrograms: on a server with a worker of its
// own, an agent command whose program is not on the server's PATH is
// refused while no agent host is enrolled (agent_missing); once one is,
// it is taken, the server's own worker leaves it, and a host's claim
// gets it.
func TestLocalWorkerLeavesHostPrograms(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		srv := start(t, c)
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		tool := spec("run the tool", "no-such-tool-on-this-server --go", nil)
		if a := srv.submit(t, tool, bundleOf(t, repo)); a.status == http.StatusCreated || !strings.Contains(string(a.body), "agent_missing") {
			t.Fatalf("submit with no agent host: %d %s", a.status, a.body)
		}
		cred := enrolHost(t, srv, c, "h1", nil)
		id := srv.runID(t, tool, bundleOf(t, repo))
		a := srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "wait_ms": 5000})
		if a.status != http.StatusOK {
			t.Fatalf("claim: %d %s", a.status, a.body)
		}
		if r, _ := a.doc(t)["run"].(map[string]any); r == nil || r["id"] != id {
			t.Fatalf("the host's claim got %v, want run %s (the server's own worker must leave it)", r, id)
		}
	})
}
