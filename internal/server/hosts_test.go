package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// enrolToken makes a one-time token with the binary, on c's database.
func enrolToken(t *testing.T, c config) string {
	t.Helper()
	cmd := exec.Command(testsupport.Agentrun(t), "server", "enrol-token", "--json", "--data", c.data, "--database-url", c.db)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C"}
	out, err := cmd.Output()
	var d struct{ Token string }
	if err == nil {
		err = json.Unmarshal(out, &d)
	}
	if err != nil || d.Token == "" {
		t.Fatalf("enrol-token: %v: %s", err, out)
	}
	return d.Token
}

// asHost calls a host route with credential cred (and a JSON body).
func (in *instance) asHost(t *testing.T, cred, method, pattern, id string, body any) answer {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return in.call(t, method, pattern, id, "application/json", bytes.NewReader(b), "Authorization", "Bearer "+cred)
}

// TestHostRoutes: the routes of agent hosts, driven as a host would, answer
// as the API document says; every route of a run is fenced by the claim's
// token, and a host's credential is not a user's token nor the reverse.
func TestHostRoutes(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--local-worker", "0"}
		srv := start(t, c)
		tok := enrolToken(t, c)
		enrol := map[string]any{"token": tok, "name": "h1", "slots": 1, "backends": []string{"host"}, "labels": map[string]string{"zone": "a"}}
		a := srv.post(t, "/v1/hosts/enrol", "", enrol)
		if a.status != http.StatusCreated {
			t.Fatalf("enrol: %d %s", a.status, a.body)
		}
		cred, _ := a.doc(t)["credential"].(string)
		if a := srv.post(t, "/v1/hosts/enrol", "", enrol); a.status != http.StatusForbidden || a.code(t) != "enrol_refused" {
			t.Errorf("a token used twice: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, "nobody.x", "POST", "/v1/hosts/heartbeat", "", map[string]any{"runs": []any{}}); a.code(t) != "host_refused" {
			t.Errorf("an unknown credential: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}}); a.status != 200 || a.doc(t)["run"] != nil {
			t.Errorf("a claim with nothing queued: %d %s", a.status, a.body)
		}

		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		id := srv.runID(t, spec("wait", "sleep 30", nil), bundleOf(t, repo))
		a = srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"native"}, "wait_ms": 100})
		if a.doc(t)["run"] != nil {
			t.Errorf("a run of the host sandbox went to a host without it: %s", a.body)
		}
		a = srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "wait_ms": 5000})
		var cl struct {
			Run     map[string]any `json:"run"`
			Token   int64          `json:"token"`
			Project string         `json:"project"`
		}
		_ = json.Unmarshal(a.body, &cl)
		if cl.Run == nil || cl.Run["id"] != id || cl.Token < 1 || cl.Project != "default" || cl.Run["repo"] != "" {
			t.Fatalf("claim: %s", a.body)
		}
		q := fmt.Sprintf("?token=%d", cl.Token)
		a = srv.asHost(t, cred, "GET", "/v1/hosts/runs/{id}"+q, id, nil)
		if a.status != 200 {
			t.Fatalf("get: %d %s", a.status, a.body)
		}
		version := int64(a.doc(t)["version"].(float64))
		if a := srv.asHost(t, cred, "GET", fmt.Sprintf("/v1/hosts/runs/{id}?token=%d", cl.Token+1), id, nil); a.code(t) != "lease_lost" {
			t.Errorf("another token: %d %s", a.status, a.body)
		}
		if a := srv.call(t, "GET", "/v1/hosts/runs/{id}"+q, id, "", nil); a.code(t) != "host_refused" {
			t.Errorf("no credential: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, cred, "GET", "/v1/runs/{id}", id, nil); a.status != 200 {
			// (This server has no users' token: the credential is not
			// asked for there, nor taken instead of one.)
			t.Errorf("status with a host credential: %d %s", a.status, a.body)
		}
		for _, p := range []string{"../x", "run.json", "attempts/../../x"} {
			a := srv.call(t, "POST", "/v1/hosts/runs/{id}/files"+q+"&offset=0&path="+p, id, "application/octet-stream",
				strings.NewReader("x"), "Authorization", "Bearer "+cred)
			if a.code(t) != "bad_request" {
				t.Errorf("a log at %s: %d %s", p, a.status, a.body)
			}
		}
		for _, chunk := range []struct {
			off  int
			text string
			want float64
		}{{0, "one\n", 4}, {0, "one\ntwo\n", 8}, {20, "lost", 8}} {
			a := srv.call(t, "POST", fmt.Sprintf("/v1/hosts/runs/{id}/files%s&offset=%d&path=attempts/1/agent.log", q, chunk.off), id,
				"application/octet-stream", strings.NewReader(chunk.text), "Authorization", "Bearer "+cred)
			if a.status != 200 || a.doc(t)["size"] != chunk.want {
				t.Errorf("log chunk at %d: %d %s", chunk.off, a.status, a.body)
			}
		}
		rec := cl.Run
		rec["message"] = "stale"
		// Where the host found the agent's CLI and its helpers, and what
		// it showed read-only, is the host's view: a write does not
		// change the server's record of them.
		agentRec, _ := rec["agent"].(map[string]any)
		serverAgent := fmt.Sprint(agentRec)
		agentRec = maps.Clone(agentRec)
		agentRec["binary"], agentRec["launcher"], agentRec["helpers"] = "/host/bin/cli", "/host/bin/cli.js", []string{"/host/.local/share/cli/bin/rg"}
		rec["agent"] = agentRec
		sbRec, _ := rec["sandbox"].(map[string]any)
		sbRec = maps.Clone(sbRec)
		sbRec["read_only_paths"] = []string{"/host/bin/cli", "/host/.local/share/cli/bin/rg"}
		rec["sandbox"] = sbRec
		ev := func(m string) []map[string]any { return []map[string]any{{"type": "sandbox", "message": m}} }
		if a := srv.asHost(t, cred, "PUT", "/v1/hosts/runs/{id}", id, map[string]any{"token": cl.Token, "version": version - 1, "record": rec,
			"events": ev("with the stale write")}); a.code(t) != "record_stale" {
			t.Errorf("a write from an old version: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, cred, "PUT", "/v1/hosts/runs/{id}", id, map[string]any{"token": cl.Token + 1, "version": version, "record": rec,
			"events": ev("another token's")}); a.code(t) != "lease_lost" {
			t.Errorf("a write with another token: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, cred, "PUT", "/v1/hosts/runs/{id}", id, map[string]any{"token": cl.Token, "version": version, "record": rec,
			"events": append(ev("with the write"), ev("and another")...)}); a.status != 200 {
			t.Errorf("a write with events: %d %s", a.status, a.body)
		}
		d := srv.get(t, "/v1/runs/{id}", id).doc(t)
		if sb, _ := d["sandbox"].(map[string]any); fmt.Sprint(d["agent"]) != serverAgent || sb["read_only_paths"] != nil {
			t.Errorf("the host's view reached the server's record: agent %v (was %s), sandbox %v", d["agent"], serverAgent, d["sandbox"])
		}
		// The events a write carries are journaled in order once past
		// the fence, whatever the write's answer.
		a = srv.asHost(t, cred, "GET", "/v1/hosts/runs/{id}/events"+q, id, nil)
		var carried []string
		var evs struct {
			Events []struct {
				Type, Message string
			} `json:"events"`
		}
		_ = json.Unmarshal(a.body, &evs)
		for _, e := range evs.Events {
			if e.Type == "sandbox" {
				carried = append(carried, e.Message)
			}
		}
		if want := []string{"with the stale write", "with the write", "and another"}; !slices.Equal(carried, want) {
			t.Errorf("journaled from writes: %q, want %q (%s)", carried, want, a.body)
		}
		a = srv.asHost(t, cred, "POST", "/v1/hosts/heartbeat", "", map[string]any{"runs": []map[string]any{{"id": id, "token": cl.Token}}})
		if lost, _ := a.doc(t)["lost"].([]any); a.status != 200 || len(lost) != 0 {
			t.Errorf("heartbeat: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, cred, "POST", "/v1/hosts/runs/{id}/release", id, map[string]any{"token": cl.Token}); a.status != 200 {
			t.Errorf("release: %d %s", a.status, a.body)
		}
		if a := srv.asHost(t, cred, "GET", "/v1/hosts/runs/{id}"+q, id, nil); a.code(t) != "lease_lost" {
			t.Errorf("get after the release: %d %s", a.status, a.body)
		}
		a = srv.asHost(t, cred, "POST", "/v1/hosts/heartbeat", "", map[string]any{"runs": []map[string]any{{"id": id, "token": cl.Token}}})
		if lost, _ := a.doc(t)["lost"].([]any); len(lost) != 1 {
			t.Errorf("heartbeat after the release: %s", a.body)
		}
		// Released before it started, the run waits for a host again.
		if d := srv.waitState(t, id, "queued"); d["supervisor"] != nil {
			t.Errorf("the released run: %v", d)
		}
	})
}

// enrolHost enrols a host on srv with labels and returns its credential.
func enrolHost(t *testing.T, srv *instance, c config, name string, labels map[string]string) string {
	t.Helper()
	a := srv.post(t, "/v1/hosts/enrol", "", map[string]any{"token": enrolToken(t, c), "name": name, "slots": 1,
		"backends": []string{"host"}, "labels": labels})
	if a.status != http.StatusCreated {
		t.Fatalf("enrol %s: %d %s", name, a.status, a.body)
	}
	cred, _ := a.doc(t)["credential"].(string)
	return cred
}

// TestHostLabels: a run submitted with labels goes only to a host that
// has all of them; while no enrolled host has them, its status says why
// it waits, and the server's own worker leaves it alone.
func TestHostLabels(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		srv := start(t, c) // with its local worker: it takes no labelled run
		a1 := enrolHost(t, srv, c, "a1", map[string]string{"zone": "a"})
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		id := srv.runID(t, spec("labelled", "sleep 30", map[string]any{"labels": []string{"zone=b", "gpu=1"}}), bundleOf(t, repo))
		d := srv.get(t, "/v1/runs/{id}", id).doc(t)
		labels, _ := d["labels"].(map[string]any)
		if labels["zone"] != "b" || labels["gpu"] != "1" {
			t.Fatalf("labels: %v", d["labels"])
		}
		want := "no enrolled agent host can execute it: none has the host sandbox and the labels gpu=1, zone=b"
		if d["waiting"] != want {
			t.Errorf("waiting: %q, want %q", d["waiting"], want)
		}
		if a := srv.asHost(t, a1, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "wait_ms": 500}); a.doc(t)["run"] != nil {
			t.Fatalf("a host without the labels was given the run: %s", a.body)
		}
		b1 := enrolHost(t, srv, c, "b1", map[string]string{"zone": "b", "gpu": "1", "os": "linux"})
		if d := srv.get(t, "/v1/runs/{id}", id).doc(t); d["waiting"] != nil || d["status"] != "queued" {
			t.Errorf("with a host that has the labels: waiting %v, status %v", d["waiting"], d["status"])
		}
		a := srv.asHost(t, b1, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "wait_ms": 5000})
		run, _ := a.doc(t)["run"].(map[string]any)
		if run == nil || run["id"] != id {
			t.Fatalf("the host with the labels: %s", a.body)
		}
	})
}

// A host's being seen is written at most once per tenth of the lease TTL
// (at most a second), not with each of its calls: the claims a host sends
// one after another, each on the path of the run before to its agent,
// do not each cost a write. Past that, the time moves on.
func TestHostSeenWrittenEvery(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--local-worker", "0"}
		c.leaseTTL = "20s" // seen at most every second
		srv := start(t, c)
		a := srv.post(t, "/v1/hosts/enrol", "", map[string]any{"token": enrolToken(t, c), "name": "h1", "slots": 1, "backends": []string{"host"}})
		if a.status != http.StatusCreated {
			t.Fatalf("enrol: %d %s", a.status, a.body)
		}
		cred, _ := a.doc(t)["credential"].(string)
		id, _ := a.doc(t)["host_id"].(string)
		claim := func() time.Time {
			t.Helper()
			if a := srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}}); a.status != 200 {
				t.Fatalf("claim: %d %s", a.status, a.body)
			}
			return lastSeen(t, c, id)
		}
		first := claim()
		if first.IsZero() {
			t.Fatal("a claim did not record the host as seen")
		}
		began := time.Now()
		again := claim()
		if time.Since(began) < 900*time.Millisecond && !again.Equal(first) {
			t.Errorf("seen written again %v after: %v, then %v", time.Since(began), first, again)
		}
		time.Sleep(1100 * time.Millisecond)
		if later := claim(); !later.After(first) {
			t.Errorf("seen not written a second on: %v, then %v", first, later)
		}
	})
}

// lastSeen is when host id was last seen, as 'agentrun server hosts'
// lists it (zero: never).
func lastSeen(t *testing.T, c config, id string) time.Time {
	t.Helper()
	cmd := exec.Command(testsupport.Agentrun(t), "server", "hosts", "--json", "--data", c.data, "--database-url", c.db)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C"}
	out, err := cmd.Output()
	var d struct {
		Hosts []struct {
			ID            string     `json:"id"`
			LastHeartbeat *time.Time `json:"last_heartbeat"`
		} `json:"hosts"`
	}
	if err == nil {
		err = json.Unmarshal(out, &d)
	}
	if err != nil {
		t.Fatalf("server hosts: %v: %s", err, out)
	}
	for _, h := range d.Hosts {
		if h.ID == id && h.LastHeartbeat != nil {
			return *h.LastHeartbeat
		}
	}
	return time.Time{}
}
