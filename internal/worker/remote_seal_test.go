package worker

import (
	"errors"
	"maps"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/server"
)

// TestHandoffEnvIsTheServers: a claim's values open with the host's key
// for its run and token; the host's own environment fills only the names
// --own-env gives, where the server sent none; a claim sealed for another
// token (a replay) fails the run.
func TestHandoffEnvIsTheServers(t *testing.T) {
	key, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]string{"FROM_SERVER": "host-value", "FROM_HOST": "host-only", "NOT_ALLOWED": "host-secret"}
	w := &Remote{HostID: "h1", Key: key, OwnEnv: []string{"FROM_HOST", "FROM_SERVER"}, Getenv: func(n string) string { return own[n] }}
	r := &run.Run{ID: "r1", Agent: run.AgentSpec{Env: []string{"FROM_SERVER", "FROM_HOST", "NOT_ALLOWED", "UNSET"}}}
	j := newJob("r1", 3, "p")
	blob, err := seal.Seal(key.Public(), seal.Info{Run: "r1", Host: "h1", Token: 3}, map[string]string{"FROM_SERVER": "server-value", "EXTRA": "x"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := w.handoffEnv(j, server.Claim{Run: r, Token: 3, SealedEnv: blob})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"FROM_SERVER": "server-value", "FROM_HOST": "host-only"}
	if len(env) != len(want) || env["FROM_SERVER"] != want["FROM_SERVER"] || env["FROM_HOST"] != want["FROM_HOST"] {
		t.Errorf("env %v, want %v", env, want)
	}
	// Without --own-env, only the server's values.
	w.OwnEnv = nil
	if env, err := w.handoffEnv(j, server.Claim{Run: r, Token: 3, SealedEnv: blob}); err != nil || len(env) != 1 {
		t.Errorf("without --own-env: %v %v", env, err)
	}
	if _, err := w.handoffEnv(newJob("r1", 4, "p"), server.Claim{Run: r, Token: 4, SealedEnv: blob}); !errors.Is(err, seal.ErrOpen) {
		t.Errorf("a blob of another token: %v", err)
	}
	w.Key = nil
	if _, err := w.handoffEnv(j, server.Claim{Run: r, Token: 3, SealedEnv: blob}); err == nil {
		t.Error("opened without a key")
	}
}

// TestHandoffEnvNetworkIsTheHosts: how a run's gateway reaches its model
// server (the proxy, the certificate authorities) is the agent host's
// own environment, never the server's, --own-env or not.
func TestHandoffEnvNetworkIsTheHosts(t *testing.T) {
	key, err := seal.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]string{"HTTPS_PROXY": "http://host-proxy:3128", "NO_PROXY": "gpu.internal", "MODEL_KEY": "host-key"}
	w := &Remote{HostID: "h1", Key: key, Getenv: func(n string) string { return own[n] }}
	r := &run.Run{ID: "r1", Gateway: &run.GatewaySpec{Routes: []run.RouteSpec{{Name: "openai", URL: "https://models.example",
		Keys: []run.KeySource{{Env: "MODEL_KEY", Header: "authorization"}}}}}}
	blob, err := seal.Seal(key.Public(), seal.Info{Run: "r1", Host: "h1", Token: 3},
		map[string]string{"MODEL_KEY": "server-key", "HTTPS_PROXY": "http://server-proxy:3128"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := w.handoffEnv(newJob("r1", 3, "p"), server.Claim{Run: r, Token: 3, SealedEnv: blob})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"MODEL_KEY": "server-key", "HTTPS_PROXY": "http://host-proxy:3128", "NO_PROXY": "gpu.internal"}
	if !maps.Equal(env, want) {
		t.Errorf("env %v, want %v", env, want)
	}
}
