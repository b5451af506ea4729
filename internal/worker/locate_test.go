package worker

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// TestLocateFindsHelpersOnThisHost: a claimed profile run takes this
// host's view of its CLI and of the helpers the CLI runs (recorded and
// shown read-only where this host has them), and this host logs a
// warning for a helper it has nowhere, in place of what the server found.
func TestLocateFindsHelpersOnThisHost(t *testing.T) {
	bin, home := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(bin, "tcli"), filepath.Join(home, ".local/share/tcli/bin/hx")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	profile := agent.Info{Name: "t", Binary: "tcli", Helpers: []agent.Helper{
		{Name: "hx", What: "hx, for search", DataDir: "tcli/bin", Install: "install hx"},
		{Name: "hy", What: "hy, for lint", Install: "install hy"},
	}}
	var logged bytes.Buffer
	w := &Remote{Agents: agent.Catalog{profile}, Log: slog.New(slog.NewTextHandler(&logged, nil)),
		Getenv: func(k string) string { return map[string]string{"PATH": bin, "HOME": home}[k] }}
	r := &run.Run{ID: "r1", Agent: run.AgentSpec{Name: "t", Binary: "tcli", Helpers: []string{"/server/hx"}},
		Sandbox: run.SandboxConfig{ReadOnlyPaths: []string{"/server/hx"}}}
	set := w.locate(r)
	if set == nil {
		t.Fatal("no change for a CLI on this host's PATH")
	}
	set(r)
	hx := filepath.Join(home, ".local/share/tcli/bin/hx")
	if r.Agent.Binary != filepath.Join(bin, "tcli") || !slices.Equal(r.Agent.Helpers, []string{hx}) ||
		!slices.Equal(r.Sandbox.ReadOnlyPaths, []string{filepath.Join(bin, "tcli"), hx}) {
		t.Fatalf("agent %+v, read-only %q", r.Agent, r.Sandbox.ReadOnlyPaths)
	}
	if !strings.Contains(logged.String(), "hy (hy, for lint) is not on PATH: those tools fail in the sandbox; install hy") {
		t.Fatalf("log:\n%s", logged.String())
	}
}
