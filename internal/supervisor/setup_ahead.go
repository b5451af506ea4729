package supervisor

import (
	"context"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// BuildSetup finds or makes the setup layer of the planned run r (its
// Setup, base commit and sandbox) ahead of any run, as a run would
// (setupStep): in d's layer cache, with d's backends, egress proxy and
// workspace providers. Its log and sandbox state are kept under scratch
// (an empty directory the caller removes), not among the runs; the setup
// log is scratch's SetupLog(r.ID). Events go to event.
func BuildSetup(ctx context.Context, d Deps, r *run.Run, scratch string, event func(run.Event)) (workspace.SetupLayer, error) {
	l := layout.Layout{Home: scratch}
	if err := os.MkdirAll(l.RunDir(r.ID), 0o700); err != nil {
		return workspace.SetupLayer{}, err
	}
	backend := d.Backends[r.Sandbox.Backend]
	st := &setupStep{Record: r, Layout: l, Cache: d.Layers, Backend: backend, Copy: d.Workspaces,
		StateDir: l.WorkspaceState(r.ID), Env: setupToolchainEnv(r.Sandbox.Toolchains), ReadOnly: toolchainPaths(r.Sandbox.Toolchains),
		StartProxy: d.StartEgress, Getenv: os.Getenv, Event: event} // (the command's process: the user's environment)
	if d.Layers == nil {
		return workspace.SetupLayer{}, errMissing("the layer cache")
	}
	// The checkout layer, when the backend mounts overlays: a workspace
	// on it, made in scratch, holds it while the setup runs.
	if lm, ok := backend.(sandbox.LayerMounter); ok && d.Overlay != nil && lm.ProbeLayers(ctx, d.Layout.Cache()) == nil {
		ws, err := d.Overlay.Create(ctx, r.Repo, r.Base, filepath.Join(scratch, "workspace"), filepath.Join(scratch, "workspace-state"))
		if err == nil {
			if lw, ok := ws.(workspace.Layered); ok {
				st.Lower = lw.Layers().Lower
			}
		}
	}
	// Made ahead, for runs to come (possibly after a reboot): on disk for
	// good before the command returns.
	defer d.Layers.Wait()
	return st.Run(ctx)
}
