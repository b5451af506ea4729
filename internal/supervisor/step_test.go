package supervisor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Helpers for the step tests (step_*_test.go): each builds one step with
// real parts and asserts its contract.

// journal collects what a step journals (its Event func). Steps may
// journal from other goroutines (the proxy, the gateway).
type journal struct {
	mu  sync.Mutex
	evs []run.Event
}

func (j *journal) add(e run.Event) {
	j.mu.Lock()
	j.evs = append(j.evs, e)
	j.mu.Unlock()
}

// of returns the events of type typ, in order.
func (j *journal) of(typ string) []run.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []run.Event
	for _, e := range j.evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (j *journal) len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.evs)
}

// data decodes an event's data into a map.
func data(t *testing.T, e run.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("event %q data %s: %v", e.Message, e.Data, err)
	}
	return m
}

// hasKeys fails unless m has every key.
func hasKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("data %v lacks %q", m, k)
		}
	}
}

// stepRun is a run record of repo at base with its data directory: the
// layout's home is short, so that the run's sockets fit in its sandbox
// state directory.
func stepRun(t *testing.T, repo, base string) (*run.Run, layout.Layout) {
	t.Helper()
	id := run.NewID()
	r := &run.Run{ID: id, Repo: repo, Base: base, Branch: run.BranchName(id), Task: "write a file\n\ndetails",
		Sandbox: run.SandboxConfig{Backend: host.Name},
		Export:  run.ExportConfig{MaxFiles: 100, MaxBytes: 1 << 20, AuthorName: "T", AuthorEmail: "t@example.com"}}
	return r, layout.Layout{Home: testsupport.ShortDir(t)}
}

// startWorkspace makes r's workspace with the workspace step.
func startWorkspace(t *testing.T, r *run.Run, l layout.Layout) workspace.Workspace {
	t.Helper()
	ws := &workspaceStep{Provider: workspace.NewCheckout(), Record: r, Dir: l.Workspace(r.ID), StateDir: l.WorkspaceState(r.ID), Event: (&journal{}).add}
	if err := ws.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Wait(); err != nil {
		t.Fatal(err)
	}
	return ws.Workspace()
}

// startSandbox starts r's host sandbox on its workspace with the sandbox
// step, stopped when the test ends.
func startSandbox(t *testing.T, r *run.Run, l layout.Layout) *sandboxStep {
	t.Helper()
	sb := &sandboxStep{Record: r, Layout: l, Backend: host.New(), Event: (&journal{}).add}
	if err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Stop(context.Background()) })
	return sb
}
