package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/modelserver"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// sh runs a shell command in the sandbox and returns its output.
func sh(t *testing.T, sb sandbox.Sandbox, cmd string) (string, error) {
	t.Helper()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: cmd, Cwd: sb.WorkDir()}, &out, &out)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit code %d: %s", res.ExitCode, out.String())
	}
	return strings.TrimSpace(out.String()), err
}

// TestSandboxStep: Start starts the host sandbox on the workspace once it
// is complete, journals what it enforces and how long the workspace and
// the start took; processes inside work in the workspace with the
// sandbox's HOME. Stop ends it once (one "sandbox stopped"), leaving
// the workspace as it is; settle then destroys it, once.
func TestSandboxStep(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	r, l := stepRun(t, repo, base)
	ws := startWorkspace(t, r, l)
	j := &journal{}
	var sandboxUp bool
	s := &sandboxStep{Record: r, Layout: l, Backend: host.New(), Event: j.add}
	s.Ready = func() (time.Duration, error) {
		sandboxUp = s.Sandbox() != nil
		return 42 * time.Millisecond, nil
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !sandboxUp {
		t.Fatal("Ready was waited for before the sandbox started: the two no longer overlap")
	}
	sb := s.Sandbox()
	if out, err := sh(t, sb, "pwd; echo $HOME; cat a.txt; echo made > made.txt"); err != nil || out != ws.Dir()+"\n"+l.SandboxHome(r.ID)+"\na" {
		t.Fatalf("in the sandbox: %q %v", out, err)
	}
	evs := j.of(run.EventSandbox)
	if len(evs) != 1 || evs[0].Message != "sandbox started (host)" {
		t.Fatalf("events %+v", j.evs)
	}
	d := data(t, evs[0])
	hasKeys(t, d, "enforced", "start_time")
	if d["backend"] != "host" || d["network"] != "none" || d["workspace_time"] != "42ms" || s.Enforced() == nil {
		t.Fatalf("started event data %v, enforced %v", d, s.Enforced())
	}
	s.Stop(ctx)
	s.Stop(ctx)
	if evs := j.of(run.EventSandbox); len(evs) != 2 || evs[1].Message != "sandbox stopped" {
		t.Fatalf("events after two Stops %+v", evs)
	}
	if _, err := sh(t, sb, "true"); err == nil {
		t.Fatal("the sandbox still runs commands after Stop")
	}
	if b, err := os.ReadFile(filepath.Join(ws.Dir(), "made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("the workspace after Stop: %q %v", b, err)
	}
	s.settle(ctx)
	s.settle(ctx)
	if ents, _ := os.ReadDir(l.SandboxState(r.ID)); len(ents) > 0 {
		t.Fatalf("sandbox state left: %v", ents)
	}
}

// TestSandboxStepWorkspaceFailed: when the workspace could not be made,
// Start fails with its error and journals no start; Stop still stops the
// sandbox that Start had started, and settle destroys it.
func TestSandboxStepWorkspaceFailed(t *testing.T) {
	r, l := stepRun(t, t.TempDir(), "")
	if err := os.MkdirAll(l.Workspace(r.ID), 0o755); err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	fillErr := errors.New("workspace: the filling failed")
	s := &sandboxStep{Record: r, Layout: l, Backend: host.New(), Event: j.add,
		Ready: func() (time.Duration, error) { return 0, fillErr }}
	if err := s.Start(context.Background()); !errors.Is(err, fillErr) {
		t.Fatalf("err %v", err)
	}
	if j.len() != 0 || s.Sandbox() == nil {
		t.Fatalf("events %+v, sandbox %v", j.evs, s.Sandbox())
	}
	s.Stop(context.Background())
	if evs := j.of(run.EventSandbox); len(evs) != 1 || evs[0].Message != "sandbox stopped" {
		t.Fatalf("events %+v", j.evs)
	}
	s.settle(context.Background())
	if ents, _ := os.ReadDir(l.SandboxState(r.ID)); len(ents) > 0 {
		t.Fatalf("sandbox state left: %v", ents)
	}
}

func TestSandboxStepNoBackend(t *testing.T) {
	r, l := stepRun(t, t.TempDir(), "")
	r.Sandbox.Backend = "nosuch"
	j := &journal{}
	s := &sandboxStep{Record: r, Layout: l, Event: j.add}
	if err := s.Start(context.Background()); err == nil || err.Error() != `sandbox backend "nosuch" is not available in this build` {
		t.Fatalf("err %v", err)
	}
	s.Stop(context.Background())
	if j.len() != 0 {
		t.Fatalf("events %+v", j.evs)
	}
}

func TestSandboxStepStopWithoutStart(t *testing.T) {
	s := &sandboxStep{}
	s.Stop(context.Background())
	s.Stop(context.Background())
}

// TestSandboxStepReachesProxyAndGateway: given the sockets of a real
// egress proxy and a real model gateway, the sandbox reaches the network
// only through the proxy (its decisions journaled by the egress step) and
// the model through the gateway, with the placeholder.
func TestSandboxStepReachesProxyAndGateway(t *testing.T) {
	testsupport.Program(t, "curl")
	srv := modelserver.New(t, gatewayTestKey, "m", modelserver.Text("hello"))
	r, gw, _ := gatewayRun(t, srv)
	l := gw.Layout
	r.Sandbox.Network, r.Sandbox.Allow = string(sandbox.NetworkAllowlist), []string{"allowed.invalid"}
	ctx := context.Background()
	if err := os.MkdirAll(l.Workspace(r.ID), 0o755); err != nil {
		t.Fatal(err)
	}
	ej := &journal{}
	eg := &egressStep{Record: r, Layout: l, StartProxy: testDeps(nil, l).StartEgress, Event: ej.add}
	for _, step := range []resource{eg, gw} {
		if err := step.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer step.Stop(ctx)
	}
	j := &journal{}
	s := &sandboxStep{Record: r, Layout: l, Backend: host.New(), ProxySocket: eg.Socket(), GatewaySocket: gw.Socket(), Event: j.add}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if d := data(t, j.of(run.EventSandbox)[0]); d["network"] != "allowlist" {
		t.Fatalf("started event data %v", d)
	}
	sb := s.Sandbox()
	if sb.GatewayAddr() == "" {
		t.Fatal("the gateway was not bridged")
	}
	code, err := sh(t, sb, `curl -s -o /dev/null -w '%{http_code}' http://denied.invalid/`)
	if err != nil || code != "403" {
		t.Fatalf("a host not allowed, through the proxy: %q %v", code, err)
	}
	// The proxy journals the refusal as it ends the connection: the
	// answer may reach curl a moment before the event is written.
	evs := ej.of(run.EventEgress)
	for i := 0; i < 100 && len(evs) == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		evs = ej.of(run.EventEgress)
	}
	if len(evs) != 1 || data(t, evs[0])["host"] != "denied.invalid" || data(t, evs[0])["allowed"] != false {
		t.Fatalf("egress events %+v", evs)
	}
	code, err = sh(t, sb, `curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer `+gw.host().Key+`' -H 'Content-Type: application/json' `+
		`-d '{"model":"m","messages":[{"role":"user","content":"hi"}]}' http://`+sb.GatewayAddr()+`/openai/v1/chat/completions`)
	if err != nil || code != "200" {
		t.Fatalf("the model through the gateway: %q %v", code, err)
	}
	if reqs := srv.ModelRequests(modelserver.Chat); len(reqs) != 1 || reqs[0].Key != gatewayTestKey {
		t.Fatalf("requests at the model server %+v", reqs)
	}
}
