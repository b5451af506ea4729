package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// TestHostGetsTheServersKeySealed: the model key is in the server's
// environment only. A host enrolled before sealing keys (its host.json
// without one) registers a key at its start; a built-in agent run goes
// to it, its gateway calls the model server with the server's key, which
// reached the host sealed to its key; the key is nowhere on disk (the
// host's data, the server's data and database, the run's files). A host
// whose key is swapped for another in host.json is refused by the server.
func TestHostGetsTheServersKeySealed(t *testing.T) {
	e := newEnv(t)
	model := e.scriptedServer(modelserver.WriteFile("hello.txt", "hello\n"), "")
	own := e.vars
	e.vars = append(slices.Clone(own), "SCRIPTED_KEY="+realKey)
	tm := teamOn(e, t, sqltest.Targets[0], 0, hostTTL)
	e.vars = own // the CLI and the hosts do not have the key

	// A host from before sealing keys: enrolled with no key, its
	// host.json holds only the server, its id and its credential.
	data := filepath.Join(e.root, "old")
	hostID := enrolKeyless(t, tm, data)
	h := tm.startHostIn(tm.url, "old", data, "")
	fp := regexp.MustCompile(`sealing key ([0-9a-f]{16})`).FindStringSubmatch(h.output())
	if fp == nil {
		t.Fatalf("the host names no sealing key:\n%s", h.output())
	}
	res := tm.admin("hosts", "--json")
	must(t, res, 0)
	var list struct {
		Hosts []struct {
			ID      string `json:"id"`
			SealKey string `json:"seal_key"`
		} `json:"hosts"`
	}
	_ = json.Unmarshal([]byte(res.stdout), &list)
	if len(list.Hosts) != 1 || list.Hosts[0].ID != hostID || list.Hosts[0].SealKey != fp[1] {
		t.Fatalf("hosts (want %s with key %s): %s", hostID, fp[1], res.stdout)
	}
	if res := tm.admin("hosts"); !strings.Contains(res.stdout, fp[1]) {
		t.Errorf("the host list shows no key:\n%s", res.stdout)
	}

	d, res := e.submitJSON(tm.srv, "--sandbox", "host", "--agent", "builtin", "--model", "test-model", "--model-server", "scripted",
		"--attempts", "1", "Write hello.txt")
	if res.code != 0 || d.ID == "" {
		t.Fatalf("submit: %s %s", res.stdout, res.stderr)
	}
	if got := tm.waitEnded(d.ID); got.Status != "succeeded" {
		t.Fatalf("run %s: %s/%s\n%s", d.ID, got.Status, got.Reason, h.output())
	}
	if cs := tm.claims(d.ID); len(cs) != 1 || cs[0].host != "old" {
		t.Errorf("claims: %+v", cs)
	}
	reqs := model.ModelRequests(modelserver.Chat)
	if len(reqs) == 0 {
		t.Fatal("the model server got no request")
	}
	for _, q := range reqs {
		if q.Key != realKey {
			t.Fatalf("the model server got key %q", q.Key)
		}
	}
	assertNoKeyOnDisk(t, e)

	// Another key in host.json (a copy of the credential with a key of
	// one's own): the server refuses it, and the host stops.
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	<-h.done
	b, err := os.ReadFile(filepath.Join(data, "host.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id map[string]any
	_ = json.Unmarshal(b, &id)
	delete(id, "seal_key")
	b, _ = json.Marshal(id)
	if err := os.WriteFile(filepath.Join(data, "host.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, "--json", "worker", "--server", tm.url, "--backend", "host", "--data", data)
	cmd.Env = e.vars
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	_ = cmd.Run()
	if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(so.String(), "seal_key_refused") {
		t.Errorf("a swapped key: exit %d\n%s\n%s", cmd.ProcessState.ExitCode(), so.String(), se.String())
	}
	res = tm.admin("hosts", "--json")
	if !strings.Contains(res.stdout, fp[1]) {
		t.Errorf("the server's key of the host changed: %s", res.stdout)
	}
}

// enrolKeyless enrols a host as a host from before sealing keys did (no
// key in the request) and writes its host.json in data.
func enrolKeyless(t *testing.T, tm *team, data string) string {
	t.Helper()
	tok, err := os.ReadFile(tm.token("1h"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"token": strings.TrimSpace(string(tok)), "name": "old", "slots": 2, "backends": []string{"host"}})
	resp, err := http.Post(tm.url+"/v1/hosts/enrol", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		HostID     string `json:"host_id"`
		Credential string `json:"credential"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("enrol: %d %v", resp.StatusCode, err)
	}
	b, _ := json.Marshal(map[string]string{"server": tm.url, "host_id": out.HostID, "credential": out.Credential})
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "host.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out.HostID
}
