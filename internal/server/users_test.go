package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// as is the server called with token.
func (in *instance) as(token string) *instance {
	c := *in
	c.token = token
	return &c
}

// addUser makes a user over the API and returns its first token.
func (in *instance) addUser(t *testing.T, name, role string) string {
	t.Helper()
	a := in.post(t, "/v1/users", "", map[string]string{"name": name, "role": role})
	if a.status != http.StatusCreated {
		t.Fatalf("add user %s: %d %s", name, a.status, a.body)
	}
	s, _ := a.doc(t)["secret"].(string)
	if !strings.HasPrefix(s, "agr_") {
		t.Fatalf("add user %s: no token: %s", name, a.body)
	}
	return s
}

func (in *instance) setLimits(t *testing.T, name string, l map[string]any) {
	t.Helper()
	if a := in.call(t, "POST", "/v1/users/{name}/limits", name, "application/json", strings.NewReader(mustJSON(l))); a.status != http.StatusOK {
		t.Fatalf("limits of %s: %d %s", name, a.status, a.body)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func listIDs(t *testing.T, in *instance) []string {
	t.Helper()
	a := in.get(t, "/v1/runs", "")
	if a.status != http.StatusOK {
		t.Fatalf("list: %d %s", a.status, a.body)
	}
	var d struct {
		Runs []struct{ ID string } `json:"runs"`
	}
	_ = json.Unmarshal(a.body, &d)
	var ids []string
	for _, r := range d.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

var (
	readRoutes  = []string{"/v1/runs/{id}", "/v1/runs/{id}/logs", "/v1/runs/{id}/logs/stream", "/v1/runs/{id}/result", "/v1/runs/{id}/diff", "/v1/runs/{id}/bundle", "/v1/runs/{id}/egress"}
	writeRoutes = []string{"/v1/runs/{id}/cancel", "/v1/runs/{id}/resume", "/v1/runs/{id}/verdict"}
)

func writeBody(route string) any {
	if strings.HasSuffix(route, "/verdict") {
		return map[string]string{"verdict": "accept"}
	}
	return map[string]any{}
}

// TestRolesOnRunRoutes: a member reaches only their own runs (another's
// answers run_not_found, as a run that does not exist, by id and by
// prefix); a viewer reads every run and changes none; an admin does all.
func TestRolesOnRunRoutes(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.token = "bootstrap-secret"
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		srv := start(t, c)
		alice := srv.as(srv.addUser(t, "alice", "member"))
		bob := srv.as(srv.addUser(t, "bob", "member"))
		vic := srv.as(srv.addUser(t, "vic", "viewer"))
		ada := srv.as(srv.addUser(t, "ada", "admin"))

		id := alice.runID(t, spec("add b", "echo new > b.txt", nil), bundleOf(t, repo))
		d := alice.waitState(t, id, "succeeded")
		if by, _ := d["submitted_by"].(map[string]any); by["name"] != "alice" {
			t.Fatalf("submitted_by: %v", d["submitted_by"])
		}
		for who, want := range map[*instance]int{alice: 1, bob: 0, vic: 1, ada: 1, srv: 1} {
			if got := listIDs(t, who); len(got) != want {
				t.Errorf("list as %s: %v, want %d runs", who.token[:8], got, want)
			}
		}
		missing := bob.get(t, "/v1/runs/{id}", "zzzzzzzzzz")
		for _, route := range readRoutes {
			for _, ref := range []string{id, id[:5]} {
				a := bob.get(t, route, ref)
				if a.status != http.StatusNotFound || a.code(t) != "run_not_found" {
					t.Errorf("bob GET %s (%s): %d %s", route, ref, a.status, a.body)
				}
				if e := a.doc(t)["error"].(map[string]any); e["error"] != missing.doc(t)["error"].(map[string]any)["error"] {
					t.Errorf("another's run and a missing run answer differently: %s vs %s", a.body, missing.body)
				}
			}
			for name, who := range map[string]*instance{"alice": alice, "vic": vic, "ada": ada} {
				if a := who.get(t, route, id); a.status != http.StatusOK {
					t.Errorf("%s GET %s: %d %s", name, route, a.status, a.body)
				}
			}
		}
		for _, route := range writeRoutes {
			if a := bob.post(t, route, id, writeBody(route)); a.status != http.StatusNotFound || a.code(t) != "run_not_found" {
				t.Errorf("bob POST %s: %d %s", route, a.status, a.body)
			}
			if a := vic.post(t, route, id, writeBody(route)); a.status != http.StatusForbidden || a.code(t) != "forbidden" {
				t.Errorf("vic POST %s: %d %s", route, a.status, a.body)
			}
			// Allowed past the gate: a finished run answers as finished.
			for name, who := range map[string]*instance{"alice": alice, "ada": ada} {
				a := who.post(t, route, id, writeBody(route))
				if a.status == http.StatusForbidden || a.status == http.StatusNotFound {
					t.Errorf("%s POST %s: %d %s", name, route, a.status, a.body)
				}
			}
		}
		if a := vic.submit(t, spec("x", "true", nil), bundleOf(t, repo)); a.status != http.StatusForbidden || a.code(t) != "forbidden" {
			t.Errorf("vic submit: %d %s", a.status, a.body)
		}
		if a := bob.get(t, "/v1/users", ""); a.status != http.StatusForbidden || a.code(t) != "forbidden" {
			t.Errorf("bob lists users: %d %s", a.status, a.body)
		}
		if a := ada.get(t, "/v1/users", ""); a.status != http.StatusOK || !strings.Contains(string(a.body), `"alice"`) {
			t.Errorf("ada lists users: %d %s", a.status, a.body)
		}
	})
}

// TestTokenLifecycle: a token past its expiry (a real one, a second
// old), a revoked token and a disabled user's token are refused, each
// with its own error; scopes narrow what a token may do.
func TestTokenLifecycle(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.token = "bootstrap-secret"
		srv := start(t, c)
		alice := srv.as(srv.addUser(t, "alice", "member"))
		bob := srv.as(srv.addUser(t, "bob", "member"))
		mk := func(in *instance, body map[string]any) (string, string) {
			t.Helper()
			a := in.post(t, "/v1/tokens", "", body)
			if a.status != http.StatusCreated {
				t.Fatalf("create token %v: %d %s", body, a.status, a.body)
			}
			d := a.doc(t)
			return d["secret"].(string), d["token"].(map[string]any)["id"].(string)
		}
		short, _ := mk(alice, map[string]any{"name": "short", "expires_in": "1s", "scopes": []string{"runs:read"}})
		if a := srv.as(short).get(t, "/v1/me", ""); a.status != http.StatusOK || !strings.Contains(string(a.body), `"alice"`) {
			t.Fatalf("me: %d %s", a.status, a.body)
		}
		time.Sleep(1500 * time.Millisecond)
		if a := srv.as(short).get(t, "/v1/me", ""); a.status != http.StatusUnauthorized || a.code(t) != "token_expired" {
			t.Errorf("expired: %d %s", a.status, a.body)
		}

		ci, ciID := mk(alice, map[string]any{"name": "ci"})
		if a := bob.post(t, "/v1/tokens/{id}/revoke", ciID, nil); a.status != http.StatusNotFound || a.code(t) != "token_not_found" {
			t.Errorf("bob revokes alice's token: %d %s", a.status, a.body)
		}
		if a := alice.post(t, "/v1/tokens/{id}/revoke", ciID, nil); a.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", a.status, a.body)
		}
		if a := srv.as(ci).get(t, "/v1/runs", ""); a.status != http.StatusUnauthorized || a.code(t) != "token_revoked" {
			t.Errorf("revoked: %d %s", a.status, a.body)
		}

		ro, _ := mk(alice, map[string]any{"name": "ro", "scopes": []string{"runs:read"}})
		if a := srv.as(ro).submit(t, spec("x", "true", nil), []byte("x")); a.status != http.StatusForbidden || a.code(t) != "forbidden" {
			t.Errorf("read-only token submits: %d %s", a.status, a.body)
		}
		if a := srv.as(ro).post(t, "/v1/tokens", "", map[string]any{"name": "wider", "scopes": []string{"runs:write"}}); a.status != http.StatusForbidden {
			t.Errorf("read-only token makes a write token: %d %s", a.status, a.body)
		}
		if a := alice.post(t, "/v1/tokens", "", map[string]any{"name": "adm", "scopes": []string{"admin"}}); a.status != http.StatusForbidden {
			t.Errorf("a member makes an admin token: %d %s", a.status, a.body)
		}

		if a := srv.post(t, "/v1/users/{name}/disable", "alice", nil); a.status != http.StatusOK {
			t.Fatalf("disable: %d %s", a.status, a.body)
		}
		if a := alice.get(t, "/v1/me", ""); a.status != http.StatusForbidden || a.code(t) != "user_disabled" {
			t.Errorf("disabled: %d %s", a.status, a.body)
		}
		if a := srv.post(t, "/v1/users/{name}/enable", "alice", nil); a.status != http.StatusOK {
			t.Fatalf("enable: %d %s", a.status, a.body)
		}
		if a := alice.get(t, "/v1/me", ""); a.status != http.StatusOK {
			t.Errorf("enabled again: %d %s", a.status, a.body)
		}
		for _, tok := range []string{"", "agr_nottoken", "wrong-bootstrap"} {
			if a := srv.as(tok).get(t, "/v1/me", ""); a.status != http.StatusUnauthorized || a.code(t) != "unauthorized" {
				t.Errorf("token %q: %d %s", tok, a.status, a.body)
			}
		}
	})
}

// raceSubmits sends n submits at once, each on its own connection, and
// returns how many were admitted and the refusals' messages.
func raceSubmits(t *testing.T, in *instance, n int, sp any, bundle []byte) (int, []string) {
	t.Helper()
	var mu sync.Mutex
	admitted, refused := 0, []string{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			pw, _ := mw.CreateFormField("spec")
			_ = json.NewEncoder(pw).Encode(sp)
			fw, _ := mw.CreateFormFile("bundle", "base.bundle")
			fw.Write(bundle)
			mw.Close()
			req, _ := http.NewRequest("POST", in.url+"/v1/runs", &buf)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("Authorization", "Bearer "+in.token)
			cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			<-start
			resp, err := cl.Do(req)
			if err != nil {
				t.Errorf("submit: %v", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case http.StatusCreated:
				admitted++
			case http.StatusTooManyRequests:
				refused = append(refused, string(b))
			default:
				t.Errorf("submit: %d %s", resp.StatusCode, b)
			}
		})
	}
	close(start)
	wg.Wait()
	return admitted, refused
}

// TestQuotaRaces: 50 clients racing for a user's last concurrent-run
// slot, and for the last run of the day, over real HTTP: exactly one
// each is admitted; the others are told the limit and when it frees.
func TestQuotaRaces(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.token = "bootstrap-secret"
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		bundle := bundleOf(t, repo)
		srv := start(t, c)
		bob := srv.as(srv.addUser(t, "bob", "member"))
		srv.setLimits(t, "bob", map[string]any{"concurrent_runs": 2})
		first := bob.runID(t, spec("wait", "sleep 60", nil), bundle)
		n, refused := raceSubmits(t, bob, 50, spec("wait", "sleep 60", nil), bundle)
		if n != 1 || len(refused) != 49 {
			t.Fatalf("the last concurrent slot: %d admitted, %d refused", n, len(refused))
		}
		if !strings.Contains(refused[0], `"quota_exceeded"`) || !strings.Contains(refused[0], "concurrent_runs") {
			t.Errorf("refusal: %s", refused[0])
		}
		for _, id := range listIDs(t, bob) {
			bob.post(t, "/v1/runs/{id}/cancel", id, map[string]any{})
		}
		bob.waitState(t, first, "cancelled")
		// The slots are free again.
		if a := bob.get(t, "/v1/quota", ""); !strings.Contains(string(a.body), `"concurrent_runs":0`) {
			t.Errorf("quota after the cancels: %s", a.body)
		}

		carol := srv.as(srv.addUser(t, "carol", "member"))
		srv.setLimits(t, "carol", map[string]any{"runs_per_day": 3})
		for range 2 {
			carol.runID(t, spec("quick", "true", nil), bundle)
		}
		n, refused = raceSubmits(t, carol, 50, spec("quick", "true", nil), bundle)
		if n != 1 || len(refused) != 49 {
			t.Fatalf("the last run of the day: %d admitted, %d refused", n, len(refused))
		}
		if !strings.Contains(refused[0], "runs_per_day") || !strings.Contains(refused[0], "resets at") {
			t.Errorf("refusal: %s", refused[0])
		}
	})
}

// TestTokenQuotaMidRun: a run of the built-in agent against the scripted
// model server crosses its user's daily token quota mid-run and ends
// budget_exceeded; its resume is refused until an admin raises the
// quota, then it goes on.
func TestTokenQuotaMidRun(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.token = "bootstrap-secret"
		const key = "sk-model-server"
		ms := modelserver.New(t, key, "loaded-model", func(tn modelserver.Turn) modelserver.Reply {
			call, _ := modelserver.WriteCall(tn.Tools, "", fmt.Sprintf("step%d.txt", tn.ToolResults), "more\n")
			return modelserver.Reply{Text: "again", Calls: []modelserver.Call{call}, Usage: &modelserver.Usage{Input: 60, Output: 10}}
		})
		c.toml = fmt.Sprintf("[model_servers.local]\nurl = %q\napi_key_env = \"LOCAL_KEY\"\n", ms.URL)
		c.env = []string{"LOCAL_KEY=" + key}
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		srv := start(t, c)
		dave := srv.as(srv.addUser(t, "dave", "member"))
		srv.setLimits(t, "dave", map[string]any{"tokens_per_day": 100})
		sp := map[string]any{"task": "keep writing", "agent": "builtin", "model": "loaded-model", "model_server": "local", "sandbox": "host"}
		id := dave.runID(t, sp, bundleOf(t, repo))
		d := dave.waitState(t, id, "succeeded", "failed")
		if d["reason"] != "budget_exceeded" {
			t.Fatalf("the run ended %v (%v): %v", d["status"], d["reason"], d["message"])
		}
		q := dave.get(t, "/v1/quota", "").doc(t)
		if u := q["usage"].(map[string]any); u["tokens_today"].(float64) < 100 {
			t.Errorf("quota usage: %v", q)
		}
		a := dave.post(t, "/v1/runs/{id}/resume", id, map[string]any{})
		if a.status != http.StatusTooManyRequests || a.code(t) != "quota_exceeded" || !strings.Contains(string(a.body), "tokens_per_day") {
			t.Fatalf("resume over quota: %d %s", a.status, a.body)
		}
		srv.setLimits(t, "dave", map[string]any{"tokens_per_day": 1000})
		ms.SetScript(modelserver.Text("done"))
		if a := dave.post(t, "/v1/runs/{id}/resume", id, map[string]any{}); a.status != http.StatusOK {
			t.Fatalf("resume with quota back: %d %s", a.status, a.body)
		}
		d = dave.waitState(t, id, "succeeded", "failed")
		if d["reason"] == "budget_exceeded" {
			t.Fatalf("the resumed run: %v", d)
		}
		if g := d["gateway"].(map[string]any); g["max_tokens"].(float64) > 1000 {
			t.Errorf("the resumed run's budget: %v", g["max_tokens"])
		}
	})
}

// TestQuotaDefaultsAndPerRunMax: the server's [quota] are every user's
// defaults; a run asking past a per-run maximum is refused naming it,
// one asking nothing gets the maximum; an admin's override wins.
func TestQuotaDefaultsAndPerRunMax(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.token = "bootstrap-secret"
		c.toml = "[quota]\nmax_timeout = \"1h\"\nmax_attempts = 2\nruns_per_day = 10\n"
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		bundle := bundleOf(t, repo)
		srv := start(t, c)
		eve := srv.as(srv.addUser(t, "eve", "member"))
		q := eve.get(t, "/v1/quota", "").doc(t)
		if l := q["limits"].(map[string]any); l["max_timeout"] != "1h0m0s" || l["runs_per_day"] != 10.0 {
			t.Fatalf("defaults: %v", q)
		}
		for _, extra := range []map[string]any{{"timeout": "2h"}, {"timeout": "0"}, {"attempts": 3}} {
			a := eve.submit(t, spec("x", "true", extra), bundle)
			if a.status != http.StatusTooManyRequests || a.code(t) != "quota_exceeded" || !strings.Contains(string(a.body), "per-run maximum") {
				t.Errorf("submit %v: %d %s", extra, a.status, a.body)
			}
		}
		id := eve.runID(t, spec("x", "true", nil), bundle)
		if d := eve.waitState(t, id, "succeeded", "failed"); d["timeout"] != "1h0m0s" {
			t.Errorf("the run's timeout: %v", d["timeout"])
		}
		srv.setLimits(t, "eve", map[string]any{"max_timeout": "3h"})
		eve.runID(t, spec("x", "true", map[string]any{"timeout": "2h"}), bundle)
		if u := eve.get(t, "/v1/quota", "").doc(t)["usage"].(map[string]any); u["runs_today"] != 2.0 {
			t.Errorf("runs today: %v", u)
		}
	})
}
