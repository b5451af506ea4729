package submit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
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
