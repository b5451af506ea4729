package server_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestBadInputs: what a client gets wrong is a catalog error with its
// status, and creates no run (nor, before a bundle verifies, a project).
func TestBadInputs(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		good := bundleOf(t, repo)
		srv := start(t, c)
		ok := spec("task", "true", nil)
		with := func(k string, v any) map[string]any {
			m := spec("task", "true", nil)
			m[k] = v
			return m
		}
		for _, tc := range []struct {
			name   string
			spec   any
			bundle []byte
			status int
			code   string
		}{
			{"spec not JSON", `{"task": `, good, 400, "bad_request"},
			{"unknown field", with("colour", "red"), good, 400, "bad_request"},
			{"repo from the client", with("repo", "/etc"), good, 400, "bad_request"},
			{"host paths", with("ro", []string{"/etc"}), good, 400, "bad_request"},
			{"server variables", with("env", []string{"HOME"}), good, 400, "bad_request"},
			{"bad project", with("project", "../x"), good, 400, "bad_request"},
			{"no spec", nil, good, 400, "bad_request"},
			{"no bundle", ok, nil, 422, "bad_bundle"},
			{"not a bundle", ok, []byte("# v2 git bundle\nnonsense\n"), 422, "bad_bundle"},
			{"truncated bundle", ok, good[:len(good)/2], 422, "bad_bundle"},
			{"no such head", with("base", "refs/heads/nope"), good, 422, "bad_bundle"},
		} {
			a := srv.submit(t, tc.spec, tc.bundle)
			if a.status != tc.status || a.code(t) != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.code)
			}
		}
		if ents, _ := os.ReadDir(filepath.Join(c.data, "projects")); len(ents) > 1 || (len(ents) == 1 && ents[0].Name() != ".quarantine") {
			t.Errorf("a refused bundle made a project: %v", ents)
		}
		for _, tc := range []struct {
			name string
			spec any
			code string
		}{
			{"empty task", spec("  ", "true", nil), "empty_task"},
			{"unknown sandbox", with("sandbox", "nope"), "unknown_sandbox"},
			{"bad check", with("checks", []map[string]string{{"name": "a b", "command": "true"}}), "bad_check"},
			{"no agent", map[string]any{"task": "x", "sandbox": "host", "agent": "nope"}, "unknown_agent"},
		} {
			if a := srv.submit(t, tc.spec, good); a.status != 400 || a.code(t) != tc.code {
				t.Errorf("%s: %d %s, want 400 %s", tc.name, a.status, a.body, tc.code)
			}
		}
		if a := srv.call(t, "POST", "/v1/runs", "", "application/json", strings.NewReader(`{"task":"x"}`)); a.code(t) != "bad_request" {
			t.Errorf("submit as JSON: %d %s", a.status, a.body)
		}
		if l := srv.get(t, "/v1/runs", "").doc(t); len(l["runs"].([]any)) != 0 {
			t.Fatalf("refused submits created runs: %v", l)
		}

		// Lookups and actions on runs that are not there, or cannot.
		for _, tc := range []struct {
			method, pattern, id string
			status              int
			code                string
		}{
			{"GET", "/v1/runs/{id}", "zzzzzz", 404, "run_not_found"},
			{"GET", "/v1/runs/{id}", "a!", 400, "bad_id"},
			{"GET", "/v1/runs/{id}/diff", "zzzzzz", 404, "run_not_found"},
			{"GET", "/v1/runs/{id}/bundle", "zzzzzz", 404, "run_not_found"},
			{"GET", "/v1/runs?status=bogus", "", 400, "bad_status"},
			{"GET", "/v1/runs?colour=red", "", 400, "bad_request"},
			{"GET", "/v1/nothing", "", 404, "no_route"},
		} {
			if a := srv.call(t, tc.method, tc.pattern, tc.id, "", nil); a.status != tc.status || a.code(t) != tc.code {
				t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.pattern, tc.id, a.status, a.body, tc.status, tc.code)
			}
		}
		id := srv.runID(t, spec("fail", "exit 3", map[string]any{"attempts": 1}), good)
		srv.waitState(t, id, "failed")
		for _, p := range []string{"/v1/runs/{id}/diff", "/v1/runs/{id}/bundle"} {
			if a := srv.get(t, p, id); a.status != http.StatusConflict || a.code(t) != "no_patch" {
				t.Errorf("%s of a failed run: %d %s", p, a.status, a.body)
			}
		}
		if a := srv.post(t, "/v1/runs/{id}/verdict", id, map[string]string{"verdict": "maybe"}); a.status != 400 || a.code(t) != "bad_verdict" {
			t.Errorf("verdict maybe: %d %s", a.status, a.body)
		}
		if a := srv.post(t, "/v1/runs/{id}/resume", id, map[string]any{"tsak": "x"}); a.code(t) != "bad_request" {
			t.Errorf("resume with a typo: %d %s", a.status, a.body)
		}
	})
}

// TestHostSandboxNeedsTheOperator: without --allow-host-sandbox a client
// cannot run its agent unisolated as the server's user.
func TestHostSandboxNeedsTheOperator(t *testing.T) {
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), noHost: true})
	if a := srv.submit(t, spec("x", "true", nil), bundleOf(t, repo)); a.status != 400 || a.code(t) != "bad_request" {
		t.Fatalf("host sandbox: %d %s", a.status, a.body)
	}
}

// TestToken: with --token-file every route but the probes needs the
// bearer token.
func TestToken(t *testing.T) {
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), token: "s3cret"})
	if a := srv.get(t, "/v1/runs", ""); a.status != 200 {
		t.Fatalf("with the token: %d %s", a.status, a.body)
	}
	anon := *srv
	anon.token = ""
	for _, p := range []string{"/v1/runs", "/metrics", "/v1/openapi.json", "/v1/runs/{id}"} {
		if a := anon.get(t, p, "abc"); a.status != 401 || a.code(t) != "unauthorized" {
			t.Errorf("%s without the token: %d %s", p, a.status, a.body)
		}
	}
	wrong := anon
	wrong.token = "guess"
	if a := wrong.get(t, "/v1/runs", ""); a.status != 401 {
		t.Errorf("with a wrong token: %d", a.status)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if a := anon.get(t, p, ""); a.status != 200 {
			t.Errorf("%s without the token: %d %s", p, a.status, a.body)
		}
	}
}

// TestListenRefused: a non-loopback address needs --listen-any and a
// token file.
func TestListenRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:0"},
		{"--listen", "0.0.0.0:0", "--listen-any"},
		{"--listen", "127.0.0.1:0", "--tls-cert", "x.pem"},
	} {
		cmd := exec.Command(testsupport.Agentrun(t), append([]string{"server", "--json", "--data", t.TempDir()}, args...)...)
		var out bytes.Buffer
		cmd.Stdout = &out
		err := cmd.Run()
		var doc struct{ Error struct{ Code string } }
		_ = json.Unmarshal(out.Bytes(), &doc)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || doc.Error.Code == "" {
			t.Errorf("server %v: %v %s", args, err, out.String())
		}
	}
}

// TestMetrics: /metrics counts the runs by state, the queue, the dispatch
// latency and the requests; /readyz answers while the database does.
func TestMetrics(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
		srv := start(t, c)
		id := srv.runID(t, spec("m", "echo b > b.txt", nil), bundleOf(t, repo))
		srv.waitState(t, id, "succeeded")
		if a := srv.get(t, "/readyz", ""); a.status != 200 {
			t.Errorf("readyz: %d %s", a.status, a.body)
		}
		a := srv.get(t, "/metrics", "")
		body := string(a.body)
		for _, want := range []string{
			`agentrun_runs{state="succeeded"} 1`,
			`agentrun_runs{state="queued"} 0`,
			"agentrun_queue_depth 0",
			"agentrun_dispatch_latency_seconds_count 1",
			`agentrun_http_requests_total{code="201",method="POST",route="/v1/runs"} 1`,
			`agentrun_http_request_duration_seconds_count{method="GET",route="/v1/runs/{id}"}`,
			"agentrun_local_worker_slots 2",
			"agentrun_local_worker_runs 0",
			"go_goroutines",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if t.Failed() {
			t.Log(body)
		}
	})
}

// TestCrossOrigin: a web page cannot drive a server on loopback: a
// cross-site browser request and a request under a foreign host name
// (DNS rebinding) are refused.
func TestCrossOrigin(t *testing.T) {
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db")})
	a := srv.call(t, "POST", "/v1/runs/{id}/cancel", "abc", "application/json", strings.NewReader("{}"), "Sec-Fetch-Site", "cross-site")
	if a.status != http.StatusForbidden || a.code(t) != "cross_origin" {
		t.Errorf("cross-site POST: %d %s", a.status, a.body)
	}
	req, _ := http.NewRequest("GET", srv.url+"/v1/runs", nil)
	req.Host = "attacker.example:8080"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign host name: %d", resp.StatusCode)
	}
}

// TestTLS: with --tls-cert and --tls-key the server speaks HTTPS.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentrun test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(dir, "agentrun.db"), extra: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("the server serves %s", srv.url)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if a := srv.get(t, "/v1/runs", ""); a.status != http.StatusOK {
		t.Fatalf("over TLS: %d %s", a.status, a.body)
	}
}
