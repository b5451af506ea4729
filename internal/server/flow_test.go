package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// each runs fn on a fresh server over SQLite and over PostgreSQL.
func each(t *testing.T, fn func(t *testing.T, c config)) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		fn(t, config{data: t.TempDir(), db: newURL(t)})
	})
}

// spec is a submit spec of a command agent on the host sandbox.
func spec(task, cmd string, extra map[string]any) map[string]any {
	s := map[string]any{"task": task, "agent_cmd": cmd, "sandbox": "host"}
	for k, v := range extra {
		s[k] = v
	}
	return s
}

// TestSubmitFollowAndFetch: a run submitted with a bundle of a real
// repository runs on the server's local worker; its log stream goes to
// the end and resumes from a cursor; its diff, result and bundle carry
// the change, and the bundle's branch fetched into the repository has it.
func TestSubmitFollowAndFetch(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, base := testsupport.Repo(t, map[string]string{"README.md": "hello\n", "src/a.txt": "a\n"})
		srv := start(t, c)
		id := srv.runID(t, spec("add b.txt", `printf 'working\ndone\n'; echo new > b.txt; echo more >> src/a.txt`,
			map[string]any{"checks": []map[string]string{{"name": "has-b", "command": "test -f b.txt"}}}), bundleOf(t, repo))

		evs := srv.stream(t, id, "", nil)
		if len(evs) == 0 || evs[len(evs)-1].event != "end" {
			t.Fatalf("the stream did not end with an end event: %+v", evs)
		}
		var end map[string]any
		_ = json.Unmarshal([]byte(evs[len(evs)-1].data), &end)
		if end["status"] != "succeeded" {
			t.Fatalf("end: %v", end)
		}
		var output strings.Builder
		mid := ""
		for i, e := range evs {
			if e.event == "output" {
				var p struct{ Text string }
				_ = json.Unmarshal([]byte(e.data), &p)
				output.WriteString(p.Text)
			}
			if i == len(evs)/2 {
				mid = e.id
			}
		}
		if !strings.Contains(output.String(), "working\ndone\n") {
			t.Errorf("the stream's output %q lacks the agent's", output.String())
		}
		// Reconnecting from the middle gets the rest, each event and each
		// byte once (a journal event may now come before output that came
		// first before: the order between the two is by batch).
		rest := srv.stream(t, id, mid, nil)
		count := func(evs []sse) map[string]int {
			m := map[string]int{}
			for _, e := range evs {
				m[e.event+" "+e.data]++
			}
			return m
		}
		got, want := count(rest), count(evs[len(evs)/2+1:])
		if len(got) != len(want) {
			t.Errorf("from %s: %d events, want %d:\n%+v", mid, len(rest), len(evs)-len(evs)/2-1, rest)
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("from %s: %q %d times, want %d", mid, k, got[k], n)
			}
		}

		d := srv.get(t, "/v1/runs/{id}/diff", id).doc(t)
		if p, _ := d["patch"].(string); !strings.Contains(p, "+new") || !strings.Contains(p, "+more") {
			t.Errorf("diff: %v", d)
		}
		res := srv.get(t, "/v1/runs/{id}/result?patch=true", id).doc(t)
		if res["files_changed"] != float64(2) {
			t.Errorf("result: %v", res)
		}
		st := srv.get(t, "/v1/runs/{id}", id).doc(t)
		if st["base_commit"] != base || st["provenance"].(map[string]any)["mode"] != "server" {
			t.Errorf("status: base %v (want %s), provenance %v", st["base_commit"], base, st["provenance"])
		}
		srv.get(t, "/v1/runs/{id}/logs", id)
		srv.get(t, "/v1/runs/{id}/logs?events=true", id)
		srv.get(t, "/v1/runs/{id}/egress", id)
		if l := srv.get(t, "/v1/runs?status=succeeded", "").doc(t); len(l["runs"].([]any)) != 1 {
			t.Errorf("list: %v", l)
		}
		if v := srv.post(t, "/v1/runs/{id}/verdict", id, map[string]string{"verdict": "accept", "note": "fine"}); v.status != http.StatusOK {
			t.Errorf("verdict: %d %s", v.status, v.body)
		}

		b := srv.get(t, "/v1/runs/{id}/bundle", id)
		if b.status != http.StatusOK || b.header.Get("Content-Type") != "application/x-git-bundle" {
			t.Fatalf("bundle: %d %s", b.status, b.body)
		}
		f := filepath.Join(t.TempDir(), "result.bundle")
		if err := os.WriteFile(f, b.body, 0o600); err != nil {
			t.Fatal(err)
		}
		branch := "agentrun/" + id
		testsupport.Git(t, repo, "fetch", "-q", f, branch+":"+branch)
		if got := testsupport.Git(t, repo, "show", branch+":b.txt"); got != "new" {
			t.Errorf("b.txt on %s: %q", branch, got)
		}
		if got := testsupport.Git(t, repo, "show", branch+":src/a.txt"); got != "a\nmore" {
			t.Errorf("src/a.txt on %s: %q", branch, got)
		}
		if got := testsupport.Git(t, repo, "rev-parse", branch+"^"); got != base {
			t.Errorf("%s's parent %s, want the base %s", branch, got, base)
		}
	})
}

// TestCancelAndResume: a running run is cancelled; a failed run resumed
// with a note runs a second attempt, told the note, and succeeds.
func TestCancelAndResume(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		bundle := bundleOf(t, repo)
		srv := start(t, c)

		id := srv.runID(t, spec("wait", "sleep 30", nil), bundle)
		srv.waitState(t, id, "running")
		a := srv.post(t, "/v1/runs/{id}/cancel", id, map[string]any{})
		if d := a.doc(t); a.status != http.StatusOK || d["status"] != "cancelled" {
			t.Fatalf("cancel: %d %s", a.status, a.body)
		}
		again := srv.post(t, "/v1/runs/{id}/cancel", id, nil)
		if d := again.doc(t); d["already_ended"] != true {
			t.Errorf("cancel again: %s", again.body)
		}

		marker := filepath.Join(t.TempDir(), "tried")
		note := filepath.Join(t.TempDir(), "note")
		cmd := `if [ -f ` + marker + ` ]; then cat > ` + note + `; echo fixed > a.txt; else touch ` + marker + `; exit 3; fi`
		id = srv.runID(t, spec("fix a", cmd, map[string]any{"attempts": 1}), bundle)
		srv.waitState(t, id, "failed")
		r := srv.post(t, "/v1/runs/{id}/resume", id, map[string]string{"task": "try the other way"})
		if r.status != http.StatusOK {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
		d := srv.waitState(t, id, "succeeded", "failed")
		if d["status"] != "succeeded" || len(d["attempts"].([]any)) != 2 {
			t.Fatalf("after resume: %v", d)
		}
		if b, _ := os.ReadFile(note); !strings.Contains(string(b), "try the other way") {
			t.Errorf("the second attempt was not told the note: %q", b)
		}
		if r := srv.post(t, "/v1/runs/{id}/resume", id, nil); r.code(t) != "not_resumable" || r.status != http.StatusConflict {
			t.Errorf("resume a succeeded run: %d %s", r.status, r.body)
		}
	})
}

// TestServerKilledMidRun: a server killed with -9 while its worker runs a
// run leaves it active; the restarted server marks it interrupted once
// its lease has expired, and it resumes to success.
func TestServerKilledMidRun(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		marker := filepath.Join(t.TempDir(), "tried")
		srv := start(t, c)
		id := srv.runID(t, spec("survive", `if [ -f `+marker+` ]; then echo done > b.txt; else touch `+marker+`; sleep 5; fi`, nil), bundleOf(t, repo))
		srv.waitState(t, id, "running")
		// Killed while the agent runs: "running" is recorded before the
		// agent's command has started.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the agent never started")
			}
		}
		srv.stop(syscall.SIGKILL)

		srv = start(t, c)
		d := srv.waitState(t, id, "interrupted")
		if d["reason"] != "interrupted" {
			t.Errorf("after the restart: %v", d)
		}
		if r := srv.post(t, "/v1/runs/{id}/resume", id, nil); r.status != http.StatusOK {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
		if d := srv.waitState(t, id, "succeeded", "failed"); d["status"] != "succeeded" {
			t.Fatalf("after resume: %v", d)
		}
	})
}

// TestShutdownLeavesRunsResumable: SIGTERM drains and exits 0; the run it
// was executing is interrupted, and resumes on the next start.
func TestShutdownLeavesRunsResumable(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		marker := filepath.Join(t.TempDir(), "tried")
		srv := start(t, c)
		id := srv.runID(t, spec("stop", `if [ -f `+marker+` ]; then echo done > b.txt; else touch `+marker+`; sleep 30; fi`, nil), bundleOf(t, repo))
		srv.waitState(t, id, "running")
		// A log stream open at shutdown ends; it does not hold the drain.
		streamed := make(chan struct{})
		go func() { defer close(streamed); srv.stream(t, id, "", nil) }()
		time.Sleep(200 * time.Millisecond)
		began := time.Now()
		srv.stop(syscall.SIGTERM)
		select {
		case <-streamed:
		case <-time.After(10 * time.Second):
			t.Error("the log stream did not end with the server")
		}
		if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit code %d after SIGTERM", code)
		}
		if took := time.Since(began); took > 20*time.Second {
			t.Errorf("shutdown took %s", took)
		}
		srv = start(t, c)
		if d := srv.get(t, "/v1/runs/{id}", id).doc(t); d["status"] != "interrupted" {
			t.Fatalf("after SIGTERM: %v", d["status"])
		}
		srv.post(t, "/v1/runs/{id}/resume", id, nil)
		if d := srv.waitState(t, id, "succeeded", "failed"); d["status"] != "succeeded" {
			t.Fatalf("after resume: %v", d)
		}
	})
}

// TestNativeSandbox: a run that names no sandbox gets the default, the
// native one, executed inside the server's process like any other.
func TestNativeSandbox(t *testing.T) {
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), noHost: true})
	a := srv.submit(t, map[string]any{"task": "n", "agent_cmd": "echo native > n.txt"}, bundleOf(t, repo))
	if a.status != http.StatusCreated {
		testsupport.Require(t, "the native sandbox", a.code(t) != "sandbox_preflight", "%s", a.body)
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	id, _ := a.doc(t)["id"].(string)
	d := srv.waitState(t, id, "succeeded", "failed")
	if d["status"] != "succeeded" || d["sandbox"].(map[string]any)["backend"] != "native" {
		t.Fatalf("native run: %s %v", d["status"], d["sandbox"])
	}
	if p, _ := srv.get(t, "/v1/runs/{id}/diff", id).doc(t)["patch"].(string); !strings.Contains(p, "+native") {
		t.Errorf("diff: %q", p)
	}
}

// TestQueuedWaitsForAWorker: on a server without a local worker a run
// stays queued, counted in the queue depth (not taken for dead), until it
// is cancelled.
func TestQueuedWaitsForAWorker(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		c.extra = []string{"--local-worker", "0"}
		srv := start(t, c)
		id := srv.runID(t, spec("wait", "true", nil), bundleOf(t, repo))
		time.Sleep(3 * time.Second) // past the lease TTL and a reconcile
		if d := srv.get(t, "/v1/runs/{id}", id).doc(t); d["status"] != "queued" {
			t.Fatalf("an unclaimed run is %v", d["status"])
		}
		if m := string(srv.get(t, "/metrics", "").body); !strings.Contains(m, "agentrun_queue_depth 1") {
			t.Errorf("/metrics: no queue depth 1")
		}
		a := srv.post(t, "/v1/runs/{id}/cancel", id, map[string]bool{"no_wait": true})
		if d := a.doc(t); d["status"] != "cancelled" {
			t.Fatalf("cancel: %s", a.body)
		}
	})
}

// TestResumeByPrefix: a run resumed by a prefix of its id is queued
// again and runs (its dispatch job names the whole id).
func TestResumeByPrefix(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		srv := start(t, c)
		marker := filepath.Join(t.TempDir(), "tried")
		cmd := `if [ -f ` + marker + ` ]; then echo fixed > a.txt; else touch ` + marker + `; exit 3; fi`
		id := srv.runID(t, spec("fix a", cmd, map[string]any{"attempts": 1}), bundleOf(t, repo))
		srv.waitState(t, id, "failed")
		if r := srv.post(t, "/v1/runs/{id}/resume", id[:len(id)-2], nil); r.status != http.StatusOK {
			t.Fatalf("resume: %d %s", r.status, r.body)
		}
		if d := srv.waitState(t, id, "succeeded", "failed"); d["status"] != "succeeded" {
			t.Fatalf("after resume: %v", d)
		}
	})
}
