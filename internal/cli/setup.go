package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/workspace"
)

type setupOptions struct {
	Repo       string
	Base       string
	Status     bool
	Setup      string
	SetupAllow []string
	Sandbox    string
	Image      string
	Toolchains []string
	Now        time.Time

	set func(name string) bool
}

// Validate checks the flag combinations.
func (o *setupOptions) Validate() error {
	if o.Status && (o.Setup != "" || len(o.SetupAllow) > 0 || o.Sandbox != "" || o.Image != "" || len(o.Toolchains) > 0) {
		return catalog.ConflictFlags.New("--status lists the layers; it builds none (drop --setup, --setup-allow, --sandbox, --image, --toolchain-cache)")
	}
	return nil
}

func (app *App) newSetupCmd() *cobra.Command {
	o := &setupOptions{}
	c := &cobra.Command{
		Use:   "setup [--status] [--repo DIR] [--base REF] [--setup CMD] [--setup-allow HOST]",
		Short: "Build the repository's setup layer ahead of the runs, or list the cached ones",
		Long: `Build the setup layer of the repository's base commit (HEAD unless --base)
now, as the first run on it would: the setup command (--setup, else setup in
.agentrun.toml at that commit) runs once in a sandbox of its own on the
checkout, with only the setup allowlist for network (--setup-allow HOST, else
setup_allow in config.toml); what it changed, and what it left in its HOME,
become a read-only layer in the cache that every run with the same base
commit, command, allowlist, sandbox and image starts on. A layer already
cached is not built again. The setup's output is printed when it fails.

  --status   list the setup layers cached for this repository's commits
             (key, commit, command, size, created, last used), newest use first

Setup layers are collected by 'agentrun gc' with the other cached layers
(least recently used first, within cache_budget), never while a workspace
uses one.

Under --json: {"repo", "layers": [{"key", "commit", "command", "allow",
"backend", "image", "mode", "bytes", "duration", "created", "last_used",
"workspaces"}]}; building, the same with the one layer and "built" (false:
it was cached).

EXIT STATUS
  0 the layer is cached (or the list printed); 1 the setup command failed;
  2 usage, no setup command, or the sandbox cannot run here.`,
		Args: exactArgs(0, "setup takes no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Now, o.set = time.Now(), func(n string) bool { return cmd.Flags().Changed(n) }
			if err := o.Validate(); err != nil {
				return err
			}
			if o.Status {
				return app.runSetupStatus(cmd.Context(), o)
			}
			return app.runSetupBuild(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.BoolVar(&o.Status, "status", false, "list the cached setup layers of this repository")
	f.StringVar(&o.Repo, "repo", ".", "directory inside the git repository")
	f.StringVar(&o.Base, "base", "HEAD", "base commit, branch or tag")
	f.StringVar(&o.Setup, "setup", "", "setup command (default: setup in .agentrun.toml at the base commit)")
	f.StringArrayVar(&o.SetupAllow, "setup-allow", nil, "let the setup command reach HOST (repeatable; default: setup_allow in config.toml)")
	f.StringVar(&o.Sandbox, "sandbox", "", "sandbox backend (the layer is its own per backend)")
	f.StringVar(&o.Image, "image", "", "image of the docker sandbox")
	f.StringArrayVar(&o.Toolchains, "toolchain-cache", nil, "show the host's go, npm, pip or cargo cache read-only to the setup")
	return c
}

// setupOutput is setup's JSON document.
type setupOutput struct {
	Repo   string                  `json:"repo"`
	Layers []workspace.CachedSetup `json:"layers"`
	// Built is set when building: false, the layer was cached.
	Built *bool `json:"built,omitempty"`
}

func (app *App) runSetupStatus(ctx context.Context, o *setupOptions) error {
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	repo, err := workspace.OpenRepo(ctx, o.Repo)
	if err != nil {
		return err
	}
	cache := workspace.NewLayerCache(env.Layout.LayerCache())
	known := map[string]bool{}
	layers, err := cache.ListSetup(func(commit string) bool {
		ok, seen := known[commit]
		if !seen {
			got, err := repo.ResolveBase(ctx, commit)
			ok = err == nil && got == commit
			known[commit] = ok
		}
		return ok
	})
	if err != nil {
		return fmt.Errorf("list the setup layers: %w", err)
	}
	out := setupOutput{Repo: repo.Path(), Layers: layers}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	return app.printSetupLayers(out, o.Now)
}

func (app *App) printSetupLayers(out setupOutput, now time.Time) error {
	if len(out.Layers) == 0 {
		_, err := fmt.Fprintf(app.Stdout, "no setup layers cached for %s\n", out.Repo)
		return err
	}
	t := &table{header: []string{"KEY", "COMMIT", "SIZE", "CREATED", "USED", "RUNS", "COMMAND"}}
	for _, l := range out.Layers {
		t.add(strings.TrimPrefix(l.Key, "v1-setup-")[:12], l.Commit[:min(12, len(l.Commit))], humanBytes(l.Bytes),
			ago(now, l.Made), ago(now, l.LastUsed), fmt.Sprint(l.Workspaces), oneLine(l.Command, 60))
	}
	return t.write(app.Stdout)
}

func (app *App) runSetupBuild(ctx context.Context, o *setupOptions) error {
	if app.Deps.BuildSetup == nil {
		return catalog.Internal.New("this build cannot run a setup")
	}
	s, err := config.Load(app.Getenv)
	if err != nil {
		return err
	}
	req := submit.Request{Repo: o.Repo, BaseRef: o.Base, Task: "agentrun setup", AgentCmd: "true", Attempts: 1,
		Sandbox: cmp.Or(o.Sandbox, s.Sandbox), Image: cmp.Or(o.Image, s.Image), ImagePins: s.File.Images, ImageNamed: o.Image != "",
		Setup: o.Setup, SetupAllow: s.File.SetupAllow, Toolchains: s.File.ToolchainCaches, Getenv: app.Getenv, IncludeDirty: true,
		Export: run.ExportConfig{MaxFiles: s.MaxFiles, MaxBytes: s.MaxBytes}, Limits: run.Limits{DiskBytes: s.DiskBytes, DiskInodes: s.DiskInodes},
		Version: Version}
	if o.set("setup-allow") {
		req.SetupAllow = o.SetupAllow
	}
	if o.set("toolchain-cache") {
		req.Toolchains = o.Toolchains
	}
	r, warnings, err := app.Deps.submitService().Plan(ctx, req)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		if !strings.Contains(w, "uncommitted changes") {
			fmt.Fprintf(app.Stderr, "warning: %s\n", catalog.NameFields(w, flagName))
		}
	}
	if r.Setup == nil {
		return catalog.NoSetupCommand.New("%s has no %s with a setup key at %.12s, and no --setup was given", r.Repo, submit.RepoConfigName, r.Base)
	}
	env, err := app.openEnv()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(env.Layout.Cache(), 0o755); err != nil {
		return catalog.Home.Wrap(err, "%v", err)
	}
	scratch, err := os.MkdirTemp(env.Layout.Cache(), "setup-")
	if err != nil {
		return catalog.Home.Wrap(err, "%v", err)
	}
	defer workspace.RemoveTree(scratch)
	l, err := app.Deps.BuildSetup(ctx, r, env.Layout.Home, scratch, func(e run.Event) {
		if !app.JSON && e.Type == run.EventSetup {
			fmt.Fprintf(app.Stderr, "%s\n", e.Message)
		}
	})
	if err != nil {
		if b, rerr := os.ReadFile((layout.Layout{Home: scratch}).SetupLog(r.ID)); rerr == nil && len(b) > 0 && !app.JSON {
			fmt.Fprintf(app.Stderr, "%s", tail(string(b), 64<<10))
		}
		return err
	}
	built := l.Made
	cs := workspace.CachedSetup{Key: l.Key, Commit: l.Info.Commit, Command: l.Info.Command, Allow: l.Info.Allow, Backend: l.Info.Backend,
		Image: l.Info.Image, Mode: l.Info.Mode, Bytes: l.Info.Bytes, Duration: l.Info.Duration, Made: l.Info.Made, LastUsed: time.Now().UTC()}
	if cs.Allow == nil {
		cs.Allow = []string{}
	}
	out := setupOutput{Repo: r.Repo, Layers: []workspace.CachedSetup{cs}, Built: &built}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	state := "built"
	if !built {
		state = "cached already"
	}
	_, err = fmt.Fprintf(app.Stdout, "setup layer %s for %.12s %s (%s, %s)\n", l.Key, r.Base, state, humanBytes(l.Info.Bytes), l.Info.Mode)
	return err
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
