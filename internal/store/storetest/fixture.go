package storetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// at is a fixed time, whole microseconds in UTC (SQL stores keep microseconds).
func at(minute int) time.Time {
	return time.Date(2026, 3, 14, 15, minute, 26, 535897000, time.UTC)
}

func ptr[T any](v T) *T { return &v }

// FullRun returns a run with every stored field set (checked by
// requireFilled), so a round trip proves that each one survives.
func FullRun(id string) *run.Run {
	return &run.Run{
		ID:        id,
		CreatedAt: at(1),
		UpdatedAt: at(2),
		State:     run.StateRunning,
		Reason:    run.ReasonCompleted,
		Message:   "all good — ünïcode \"quoted\"\nsecond line",
		Task:      "Fix the flaky auth tests\n\twith care",
		Repo:      "/home/dev/src/app",
		BaseRef:   "main",
		Base:      "0123456789abcdef0123456789abcdef01234567",
		Branch:    run.BranchName(id),
		Commit:    "89abcdef0123456789abcdef0123456789abcdef",
		Patch:     "/data/runs/" + id + "/result.patch",
		Dirty:     true,
		Subdir:    "svc/api",
		Warnings:  []string{"the repository has uncommitted changes; the run starts from 0123456789ab without them"},
		Agent: run.AgentSpec{
			Name: "builtin", Command: "claude -p", Env: []string{"ANTHROPIC_API_KEY"},
			Hosts: []string{"api.anthropic.com"}, Model: "m-1", Provider: "anthropic",
			BaseURL: "http://127.0.0.1:1234/v1", MaxTurns: 40, ContextWindow: 32768,
			Temperature: ptr(0.25), Binary: "/opt/cli/lib/node_modules/@openai/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
			Launcher: "/opt/cli/lib/node_modules/@openai/codex/bin/codex.js",
			Session:  "0e9a2c1b-5d7e-4f3a-9b1c-2d3e4f5a6b7c",
			Helpers:  []string{"/home/dev/.local/share/opencode/bin/rg"},
		},
		Gateway: &run.GatewaySpec{
			Routes: []run.RouteSpec{{Name: "anthropic", URL: "http://127.0.0.1:1234", Server: "lmstudio", MaxConcurrent: 4, Base: true,
				Keys: []run.KeySource{{Env: "LMSTUDIO_KEY", File: "~/.lmstudio.key", Command: "pass show lm", Header: "x-api-key",
					Extra: map[string]string{"anthropic-beta": "oauth-2025-04-20"}}}}},
			MaxTokens: 1000000, MaxCost: 2.5,
			Prices: map[string]run.Price{"m-1": {Input: 1, Output: 2, CachedInput: ptr(0.1), CacheWrite: ptr(1.25)}},
		},
		Checks:      []run.CheckSpec{{Name: "unit", Command: "go test ./..."}, {Name: "vet", Command: "go vet ./..."}},
		MaxAttempts: 3,
		Timeout:     run.Duration(90 * time.Minute),
		Sandbox: run.SandboxConfig{
			Backend: "native", Network: "allowlist", Allow: []string{"proxy.golang.org:443"}, LoopbackTCP: true,
			Limits:        run.Limits{MemoryBytes: 1 << 30, Pids: 512, CPUs: 1.5, FileSizeBytes: 1 << 28, OpenFiles: 1024, DiskBytes: 16 << 30, DiskInodes: 1000000},
			ReadOnlyPaths: []string{"/usr/local/go"},
			Image:         "sha256:5d41402abc4b2a76b9719d911017c592e3b0c44298fc1c149afbf4c8996fb924",
			Toolchains:    []run.ToolchainCache{{Name: "go", Path: "/home/dev/go/pkg/mod", Env: []string{"GOMODCACHE=/home/dev/go/pkg/mod"}}},
		},
		Setup: &run.SetupSpec{Command: "go mod download", Source: ".agentrun.toml", Allow: []string{"proxy.golang.org"},
			Layer: "v1-setup-0123", Cached: true, Duration: run.Duration(3 * time.Second)},
		Export: run.ExportConfig{MaxFiles: 1000, MaxBytes: 10 << 20, AuthorName: "agentrun", AuthorEmail: "agentrun@localhost"},
		Workspace: run.WorkspaceSpec{Mode: run.WorkspaceOverlay, History: run.HistoryFull, Include: []string{"config/local.yml"},
			NoInclude: true, Objects: []string{"/home/dev/src/app/.git/objects"}},
		Attempts: []run.Attempt{{
			N: 1, StartedAt: at(3), FinishedAt: ptr(at(4)), ExitCode: ptr(2),
			Outcome: run.ReasonChecksFailed, Message: "unit failed", Resumed: true,
			Session: "0e9a2c1b-5d7e-4f3a-9b1c-2d3e4f5a6b7c", SessionContinued: true,
			Usage: &run.Usage{PromptTokens: 10, CompletionTokens: 2, CachedTokens: 1, CacheWriteTokens: 1, Turns: 1, Requests: 1, CostUSD: 0.01,
				Models: map[string]run.ModelUsage{"m-1": {PromptTokens: 10, CompletionTokens: 2, CachedTokens: 1, CacheWriteTokens: 1, Requests: 1, CostUSD: 0.01, Unpriced: true}}},
			Checks: []run.CheckResult{{
				Name: "unit", ExitCode: 1, Passed: true, TimedOut: true,
				Duration: run.Duration(1500 * time.Millisecond), Log: "attempts/1/checks/unit.log",
			}},
		}},
		Supervisor:      &run.SupervisorInfo{PID: 4242, Host: "devbox", StartedAt: at(5), ProcStart: 987654321},
		CancelRequested: true,
		StartedAt:       ptr(at(6)),
		FinishedAt:      ptr(at(7)),
		Provenance: run.Provenance{
			Version: "v0.1.0", Host: "devbox", Mode: "lite", Sandbox: "native",
			BaseCommit: "0123456789abcdef0123456789abcdef01234567", AgentCommand: "claude -p",
			PolicyDigest: "sha256:00ff", OrgPolicyDigest: "sha256:0a0b", Enforced: map[string]string{"memory": "enforced", "pids": "unavailable: no cgroup"},
			Image:        "localhost/agentrun-go@sha256:5d41402abc4b2a76b9719d911017c592e3b0c44298fc1c149afbf4c8996fb924",
			ImageID:      "sha256:5d41402abc4b2a76b9719d911017c592e3b0c44298fc1c149afbf4c8996fb924",
			ImageDigests: []string{"localhost/agentrun-go@sha256:5d41402abc4b2a76b9719d911017c592e3b0c44298fc1c149afbf4c8996fb924"},
			Included:     []run.IncludedFile{{Path: ".env", Size: 12, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Mode: "100644"}},
		},
		Result: &run.ExportResult{
			Commit: "89abcdef0123456789abcdef0123456789abcdef", Branch: run.BranchName(id),
			Patch: "result.patch", FilesChanged: 3, Insertions: 10, Deletions: 4,
			Diffstat: " a.go | 2 +-", Refused: []run.Refusal{{Path: ".git/config", Reason: "git metadata"}},
		},
		Usage: &run.Usage{PromptTokens: 1000, CompletionTokens: 200, CachedTokens: 50, CacheWriteTokens: 5, Turns: 7, Requests: 9, CostUSD: 0.42,
			Models: map[string]run.ModelUsage{"m-1": {PromptTokens: 1000, CompletionTokens: 200, CachedTokens: 50, CacheWriteTokens: 5, Requests: 9, CostUSD: 0.42, Unpriced: true}}},
		Verdict:     &run.Verdict{Value: "accept", Note: "looks right", By: "dev", At: at(8)},
		SubmittedBy: &run.Submitter{ID: "u_abc", Name: "dev"},
		Labels:      map[string]string{"gpu": "a100", "zone": "eu"},
	}
}

// requireFilled fails the test if any stored field of v (recursively) is
// the zero value: a field added to run.Run must be added to FullRun too.
func requireFilled(t *testing.T, v any) {
	t.Helper()
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if v.IsZero() {
			t.Errorf("FullRun leaves %s zero: set it so the round trip covers it", path)
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			walk(path, v.Elem())
		case reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Uint8 {
				walk(path+"[0]", v.Index(0))
			}
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(time.Time{}) {
				return
			}
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() || strings.HasPrefix(f.Tag.Get("json"), "-") {
					continue
				}
				walk(path+"."+f.Name, v.Field(i))
			}
		}
	}
	walk("Run", reflect.ValueOf(v))
}

// requireSameRun compares two runs field by field through their JSON form
// with times normalised to UTC, and names the first differing field.
func requireSameRun(t *testing.T, want, got *run.Run) {
	t.Helper()
	w, g := normal(t, want), normal(t, got)
	if !reflect.DeepEqual(w, g) {
		for k := range w {
			if !reflect.DeepEqual(w[k], g[k]) {
				t.Errorf("field %q: want %v, got %v", k, w[k], g[k])
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				t.Errorf("field %q: want absent, got %v", k, g[k])
			}
		}
	}
}

func normal(t *testing.T, r *run.Run) map[string]any {
	t.Helper()
	c := *r
	utc := func(p *time.Time) {
		*p = p.UTC()
	}
	utc(&c.CreatedAt)
	utc(&c.UpdatedAt)
	for _, p := range []**time.Time{&c.StartedAt, &c.FinishedAt} {
		if *p != nil {
			*p = ptr((*p).UTC())
		}
	}
	c.Attempts = append([]run.Attempt(nil), c.Attempts...)
	for i := range c.Attempts {
		a := &c.Attempts[i]
		utc(&a.StartedAt)
		if a.FinishedAt != nil {
			a.FinishedAt = ptr(a.FinishedAt.UTC())
		}
	}
	if c.Supervisor != nil {
		c.Supervisor = ptr(*c.Supervisor)
		utc(&c.Supervisor.StartedAt)
	}
	if c.Verdict != nil {
		c.Verdict = ptr(*c.Verdict)
		utc(&c.Verdict.At)
	}
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("bad json %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
