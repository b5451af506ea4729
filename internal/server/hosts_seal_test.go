package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// secretValue is split so that no line of this file holds it whole: a
// scan for it finds only leaks.
var secretValue = "sk-sealed-" + "server-only-" + "41d2"

func sealKey(t *testing.T) *seal.Key {
	t.Helper()
	k, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// enrolWithKey enrols a host on srv with sealing key k (nil: none, as a
// host from before sealing keys) and returns its id and credential.
func enrolWithKey(t *testing.T, srv *instance, c config, name string, k *seal.Key) (string, string) {
	t.Helper()
	in := map[string]any{"token": enrolToken(t, c), "name": name, "slots": 2, "backends": []string{"host"}}
	if k != nil {
		in["seal_key"] = k.Public()
	}
	a := srv.post(t, "/v1/hosts/enrol", "", in)
	if a.status != http.StatusCreated {
		t.Fatalf("enrol %s: %d %s", name, a.status, a.body)
	}
	d := a.doc(t)
	return d["host_id"].(string), d["credential"].(string)
}

// TestHostSealKeyRegisteredOnce: a host enrolled without a sealing key
// registers one with its credential; the same key again is accepted,
// another is refused, for it as for a host that enrolled with one; a key
// that is not one is a bad request.
func TestHostSealKeyRegisteredOnce(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--local-worker", "0"}
		srv := start(t, c)
		a, b := sealKey(t), sealKey(t)
		_, old := enrolWithKey(t, srv, c, "old", nil)
		_, fresh := enrolWithKey(t, srv, c, "fresh", a)
		register := func(cred string, k []byte) answer {
			return srv.asHost(t, cred, "POST", "/v1/hosts/seal-key", "", map[string]any{"seal_key": k})
		}
		if ans := register(old, b.Public()); ans.status != 200 || ans.doc(t)["seal_key"] != seal.Fingerprint(b.Public()) {
			t.Fatalf("the first key: %d %s", ans.status, ans.body)
		}
		if ans := register(old, b.Public()); ans.status != 200 {
			t.Errorf("the same key again: %d %s", ans.status, ans.body)
		}
		for name, cred := range map[string]string{"old": old, "fresh": fresh} {
			if ans := register(cred, sealKey(t).Public()); ans.status != http.StatusForbidden || ans.code(t) != "seal_key_refused" {
				t.Errorf("%s: another key: %d %s", name, ans.status, ans.body)
			}
		}
		if ans := register(fresh, a.Public()); ans.status != 200 {
			t.Errorf("the enrolled key again: %d %s", ans.status, ans.body)
		}
		if ans := register(old, []byte("not a key")); ans.code(t) != "bad_request" {
			t.Errorf("not a key: %d %s", ans.status, ans.body)
		}
		if ans := srv.asHost(t, "nobody.x", "POST", "/v1/hosts/seal-key", "", map[string]any{"seal_key": a.Public()}); ans.code(t) != "host_refused" {
			t.Errorf("no credential: %d %s", ans.status, ans.body)
		}
		enrol := map[string]any{"token": enrolToken(t, c), "name": "bad", "slots": 1, "backends": []string{"host"}, "seal_key": []byte("short")}
		if ans := srv.post(t, "/v1/hosts/enrol", "", enrol); ans.code(t) != "bad_request" {
			t.Errorf("an enrolment with a bad key: %d %s", ans.status, ans.body)
		}
	})
}

// sealedClaim is a claim's answer as these tests read it.
type sealedClaim struct {
	Run       map[string]any `json:"run"`
	Token     int64          `json:"token"`
	SealedEnv []byte         `json:"sealed_env"`
}

func claimAs(t *testing.T, srv *instance, cred string, waitMS int) sealedClaim {
	t.Helper()
	a := srv.asHost(t, cred, "POST", "/v1/hosts/claim", "", map[string]any{"backends": []string{"host"}, "wait_ms": waitMS})
	var c sealedClaim
	if a.status != 200 || json.Unmarshal(a.body, &c) != nil {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	return c
}

// TestClaimSealsTheServersValues: a run that names a variable the
// server holds is not given to a host without a sealing key (its status
// says why it waits; a run that needs nothing still goes to that host);
// a host with a key gets the value sealed to it, bound to the run, the
// host and the token, and the value is nowhere in the server's data.
func TestClaimSealsTheServersValues(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		c.extra = []string{"--local-worker", "0", "--pass-env", "SEALED_SECRET"}
		c.env = []string{"SEALED_SECRET=" + secretValue}
		srv := start(t, c)
		_, old := enrolWithKey(t, srv, c, "old", nil)
		repo, _ := testsupport.Repo(t, map[string]string{"README.md": "hello\n"})
		needs := srv.runID(t, spec("needs", "sleep 30", map[string]any{"env": []string{"SEALED_SECRET"}}), bundleOf(t, repo))
		plain := srv.runID(t, spec("plain", "sleep 30", nil), bundleOf(t, repo))
		if d := srv.get(t, "/v1/runs/{id}", needs).doc(t); !strings.Contains(fmtAny(d["waiting"]), "sealing key") {
			t.Errorf("waiting: %v", d["waiting"])
		}
		if cl := claimAs(t, srv, old, 5000); cl.Run == nil || cl.Run["id"] != plain || cl.SealedEnv != nil {
			t.Fatalf("the keyless host's claim: %+v", cl)
		}
		if cl := claimAs(t, srv, old, 500); cl.Run != nil {
			t.Fatalf("the keyless host was given %v", cl.Run["id"])
		}
		k := sealKey(t)
		hostID, cred := enrolWithKey(t, srv, c, "new", k)
		if d := srv.get(t, "/v1/runs/{id}", needs).doc(t); d["waiting"] != nil {
			t.Errorf("waiting with a host that has a key: %v", d["waiting"])
		}
		cl := claimAs(t, srv, cred, 5000)
		if cl.Run == nil || cl.Run["id"] != needs || len(cl.SealedEnv) == 0 {
			t.Fatalf("the claim: %+v", cl)
		}
		if strings.Contains(string(cl.SealedEnv), secretValue) {
			t.Fatal("the claim holds the value in clear")
		}
		values, err := k.Open(seal.Info{Run: needs, Host: hostID, Token: cl.Token}, cl.SealedEnv)
		if err != nil || values["SEALED_SECRET"] != secretValue || len(values) != 1 {
			t.Fatalf("open: %v (%d values)", err, len(values))
		}
		if _, err := k.Open(seal.Info{Run: needs, Host: hostID, Token: cl.Token + 1}, cl.SealedEnv); !errors.Is(err, seal.ErrOpen) {
			t.Errorf("opened with another token: %v", err)
		}
		noSecretUnder(t, c.data)
	})
}

func fmtAny(v any) string { s, _ := v.(string); return s }

// noSecretUnder fails if any file under dir holds secretValue.
func noSecretUnder(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), secretValue) {
			t.Errorf("%s holds the server's value", p)
		}
		return nil
	})
}
