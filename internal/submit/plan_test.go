package submit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestPlanRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	backends := map[string]sandbox.Backend{"host": host.New()}
	base := func() Request {
		return Request{Repo: t.TempDir(), Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "host"}
	}
	for _, c := range []struct {
		name string
		mut  func(*Request)
		want catalog.Entry
	}{
		{"empty task", func(r *Request) { r.Task = " \n" }, catalog.EmptyTask},
		{"check name", func(r *Request) { r.Checks = []run.CheckSpec{{Name: "../x", Command: "true"}} }, catalog.BadCheck},
		{"attempts", func(r *Request) { r.Attempts = 0 }, catalog.BadAttempts},
		{"no agent", func(r *Request) { r.AgentCmd = "" }, catalog.NoAgent},
		{"both agents", func(r *Request) { r.AgentName = "claude" }, catalog.ConflictFlags},
		{"unknown agent", func(r *Request) { r.AgentCmd, r.AgentName = "", "nosuch" }, catalog.UnknownAgent},
		{"bad network", func(r *Request) { r.Network = "wide" }, catalog.BadNetwork},
		{"allow with none", func(r *Request) { r.Network, r.Allow = "none", []string{"example.com"} }, catalog.ConflictFlags},
		{"bad allow", func(r *Request) { r.Allow = []string{"http://x/"} }, catalog.BadAllow},
		{"unknown sandbox", func(r *Request) { r.Sandbox = "nosuch" }, catalog.UnknownSandbox},
		{"image without images", func(r *Request) { r.Image, r.ImageNamed = "sha256:x", true }, catalog.UnsupportedFlag},
		{"bad workspace", func(r *Request) { r.Workspace.Mode = "cow" }, catalog.BadWorkspace},
		{"bad history", func(r *Request) { r.Workspace.History = "deep" }, catalog.BadHistory},
		{"include and no include", func(r *Request) { r.Workspace.Include, r.Workspace.NoInclude = []string{".env"}, true }, catalog.ConflictFlags},
		{"bad include", func(r *Request) { r.Workspace.Include = []string{"a\nb"} }, catalog.BadInclude},
		{"not a repo", func(r *Request) {}, catalog.NotGitRepo},
		{"missing repo", func(r *Request) { r.Repo = filepath.Join(r.Repo, "nope") }, catalog.RepoMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := base()
			c.mut(&req)
			svc := &Service{Backends: backends, Agents: external.Infos(), Providers: all.Providers()}
			_, _, err := svc.Plan(ctx, req)
			if !catalog.Has(err, c.want) {
				t.Fatalf("want %s, got %v", c.want.Code, err)
			}
		})
	}
}

// TestPlanWorkspaceMode: the run records the workspace and history modes
// (the defaults by name), and an overlay asked for of a backend that
// mounts none fails at preflight, creating nothing.
func TestPlanWorkspaceMode(t *testing.T) {
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	svc := &Service{Backends: map[string]sandbox.Backend{"host": host.New()}, Agents: external.Infos(), Providers: all.Providers()}
	req := Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "host"}
	r, _, err := svc.Plan(ctx, req)
	if err != nil || r.Workspace.Mode != run.WorkspaceAuto || r.Workspace.History != run.HistoryShallow {
		t.Fatalf("default: %+v %v", r.Workspace, err)
	}
	req.Workspace.Mode = run.WorkspaceCopy
	if r, _, err = svc.Plan(ctx, req); err != nil || r.Workspace.Mode != run.WorkspaceCopy {
		t.Fatalf("copy: %+v %v", r.Workspace, err)
	}
	home := t.TempDir()
	req.Workspace.Mode, req.Data = run.WorkspaceOverlay, &layout.Layout{Home: filepath.Join(home, "data")}
	if _, _, err = svc.Plan(ctx, req); !catalog.Has(err, catalog.NoOverlay) {
		t.Fatalf("overlay on host: %v", err)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("a refused submit made %v", ents)
	}
}

// TestPlanInclude: the files .worktreeinclude and the request's patterns
// match are in the record's provenance; --no-include leaves the file out;
// patterns that include nothing at all are a warning.
func TestPlanInclude(t *testing.T) {
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{".gitignore": ".env\nlocal/\n", ".worktreeinclude": ".env\n"})
	for p, content := range map[string]string{".env": "A=1\n", "local/x": "x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	svc := &Service{Backends: map[string]sandbox.Backend{"host": host.New()}, Agents: external.Infos(), Providers: all.Providers()}
	req := Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "host"}
	paths := func(r *run.Run) string {
		var p []string
		for _, f := range r.Provenance.Included {
			p = append(p, f.Path)
		}
		return strings.Join(p, ",")
	}
	r, _, err := svc.Plan(ctx, req)
	if err != nil || paths(r) != ".env" {
		t.Fatalf("the file: %q %v", paths(r), err)
	}
	req.Workspace.Include = []string{"local/"}
	if r, _, err = svc.Plan(ctx, req); err != nil || paths(r) != ".env,local/x" {
		t.Fatalf("and a pattern: %q %v", paths(r), err)
	}
	req.Workspace.NoInclude, req.Workspace.Include = true, nil
	if r, _, err = svc.Plan(ctx, req); err != nil || paths(r) != "" {
		t.Fatalf("no include: %q %v", paths(r), err)
	}
	// Without the file, a pattern that matches nothing.
	if err := os.Remove(filepath.Join(repo, ".worktreeinclude")); err != nil {
		t.Fatal(err)
	}
	req.IncludeDirty, req.Workspace.NoInclude, req.Workspace.Include = true, false, []string{"nothing/"}
	r, warnings, err := svc.Plan(ctx, req)
	if err != nil || paths(r) != "" || len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), "matched no git-ignored file") {
		t.Fatalf("a pattern that matches nothing: %q %v %v", paths(r), warnings, err)
	}
}

// warningBackend warns of one limit, after a while (as the native
// backend does, making cgroups), and of no isolation; its preflight
// fails when err is set. ended says whether the warnings were done.
type warningBackend struct {
	countingBackend
	ended atomic.Bool
	lim   sandbox.Limits
}

func (b *warningBackend) Isolation() sandbox.Isolation { return sandbox.Isolation{} }
func (b *warningBackend) LimitWarnings(_ context.Context, lim sandbox.Limits) []string {
	time.Sleep(50 * time.Millisecond)
	b.lim = lim
	b.ended.Store(true)
	return []string{"memory: no cgroup here"}
}

// TestPlanSandboxWarnings: the backend's limit and isolation warnings,
// worked out beside the repository's inspection, reach the plan's
// warnings for the run's limits; a plan whose preflight fails returns
// only once they are done (nothing left working behind it).
func TestPlanSandboxWarnings(t *testing.T) {
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	b := &warningBackend{}
	svc := &Service{Backends: map[string]sandbox.Backend{"warn": b}, Agents: external.Infos(), Providers: all.Providers()}
	req := Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "warn", Limits: run.Limits{Pids: 77}}
	_, warnings, err := svc.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"warn sandbox: not in force on this machine: memory: no cgroup here", f("sandbox") + " warn does not isolate: the agent runs as you, with your files and your network"}
	if !slices.Equal(warnings, want) {
		t.Fatalf("warnings %q, want %q", warnings, want)
	}
	if b.lim.Pids != 77 {
		t.Fatalf("warned for limits %+v, not the run's", b.lim)
	}
	b.ended.Store(false)
	b.err = errors.New("no sandbox here")
	if _, _, err := svc.Plan(ctx, req); !catalog.Has(err, catalog.SandboxPreflight) {
		t.Fatalf("preflight: %v", err)
	}
	if !b.ended.Load() {
		t.Fatal("the plan returned before the sandbox's warnings were done")
	}
}

// TestPlanCommandProgramOnHosts: an agent command whose program is not on
// this machine's PATH is refused, unless the run goes to a team's agent
// hosts: always with no local worker (OnHosts, silently), and where an
// agent host is enrolled (AnyHost), with a warning that says so.
func TestPlanCommandProgramOnHosts(t *testing.T) {
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	svc := &Service{Backends: map[string]sandbox.Backend{"host": host.New()}, Agents: external.Infos(), Providers: all.Providers()}
	req := Request{Repo: repo, Task: "t", AgentCmd: "no-such-program-here --flag", Attempts: 1, Sandbox: "host",
		Getenv: func(k string) string {
			if k == "PATH" {
				return t.TempDir()
			}
			return ""
		}}
	const warned = `the agent command's program "no-such-program-here" is not on this server's PATH`
	if _, _, err := svc.Plan(ctx, req); !catalog.Has(err, catalog.AgentMissing) {
		t.Fatalf("on no PATH: %v, want agent_missing", err)
	}
	hosts := false
	req.AnyHost = func(context.Context) bool { return hosts }
	if _, _, err := svc.Plan(ctx, req); !catalog.Has(err, catalog.AgentMissing) {
		t.Fatalf("with no agent host enrolled: %v, want agent_missing", err)
	}
	hosts = true
	r, warnings, err := svc.Plan(ctx, req)
	if err != nil || r.Agent.Command != req.AgentCmd || !strings.Contains(strings.Join(warnings, "\n"), warned) {
		t.Fatalf("with an agent host: %v %v", warnings, err)
	}
	req.AnyHost, req.OnHosts = nil, true
	if _, warnings, err := svc.Plan(ctx, req); err != nil || strings.Contains(strings.Join(warnings, "\n"), warned) {
		t.Fatalf("on hosts only: %v %v", warnings, err)
	}
}

// hidingBackend cannot show any path under hidden at its own path.
type hidingBackend struct {
	countingBackend
	hidden string
}

func (b *hidingBackend) CheckReadOnly(p string) error {
	if strings.HasPrefix(p, b.hidden+"/") {
		return errors.New(p + " lies under " + b.hidden + ", the sandbox's own")
	}
	return nil
}

// TestPlanReadOnlyNotShown: a read-only path the backend cannot show at
// its own path is refused before anything is made: an --ro path as
// bad_path, the agent command's program as agent_not_visible, each naming
// the path; not on a team's hosts, whose own paths replace these.
func TestPlanReadOnlyNotShown(t *testing.T) {
	ctx := context.Background()
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	hidden := t.TempDir()
	tool := filepath.Join(hidden, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	svc := &Service{Backends: map[string]sandbox.Backend{"hiding": &hidingBackend{hidden: hidden}}, Agents: external.Infos(), Providers: all.Providers()}
	req := Request{Repo: repo, Task: "t", AgentCmd: "true", Attempts: 1, Sandbox: "hiding", ReadOnly: []string{tool}}
	if _, _, err := svc.Plan(ctx, req); !catalog.Has(err, catalog.BadPath) || !strings.Contains(err.Error(), tool) {
		t.Fatalf("--ro %s: %v, want bad_path naming it", tool, err)
	}
	req.ReadOnly, req.AgentCmd = nil, tool+" --fix"
	if _, _, err := svc.Plan(ctx, req); !catalog.Has(err, catalog.AgentHidden) || !strings.Contains(err.Error(), tool) {
		t.Fatalf("the command's program: %v, want agent_not_visible naming it", err)
	}
	req.OnHosts = true
	if _, _, err := svc.Plan(ctx, req); err != nil {
		t.Fatalf("on hosts: %v", err)
	}
	req.OnHosts, req.AgentCmd, req.ReadOnly = false, "true", []string{repo}
	if r, _, err := svc.Plan(ctx, req); err != nil || !slices.Contains(r.Sandbox.ReadOnlyPaths, repo) {
		t.Fatalf("a path it can show: %v", err)
	}
}
