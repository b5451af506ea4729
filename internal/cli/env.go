package cli

import (
	"context"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/supervisor/ahead"
)

// Env is the resolved environment of a command: data directory,
// configuration and the run store. Config precedence: flag > environment >
// config file > default (flags are applied by each command on top of
// Settings).
type Env struct {
	Home     string
	Layout   layout.Layout
	Store    run.Store
	Coord    coord.Coordinator
	Settings config.Settings
	// Sweepers remove the sandboxes of runs whose supervisor died (by
	// backend name), for Reconcile.
	Sweepers map[string]sandbox.Sweeper
	// Claimed: workers claim the queued runs (a team server's data
	// directory), see supervisor.Home.
	Claimed bool
	// Remote reports a run an agent host executes (supervisor.Home).
	Remote func(ctx context.Context, id string) bool
	// Waiting says why a queued run waits when no agent host could ever
	// take it (a team server's hosts); "" otherwise, or nil.
	Waiting func(ctx context.Context, r *run.Run) string
	// HostHas, AnyHost and OnHosts are a team server's (submit.Request's):
	// an agent host has a profile's CLI; one is enrolled; the runs execute
	// on agent hosts only.
	HostHas func(ctx context.Context, profile string) bool
	AnyHost func(ctx context.Context) bool
	OnHosts bool
	// settingsErr is why the configuration could not be read: only the
	// commands that use a setting fail on it (Configured), so a typo in
	// config.toml never stops list, status or logs.
	settingsErr error
}

// Configured returns the settings, or the configuration's error.
func (e *Env) Configured() (config.Settings, error) { return e.Settings, e.settingsErr }

// DataHome is the data directory: AGENTRUN_HOME, else
// $XDG_DATA_HOME/agentrun, else ~/.local/share/agentrun.
func DataHome(getenv func(string) string) string { return ahead.DataHome(getenv) }

// openEnv resolves the environment once per command (owned by the
// core/submit work; other commands only call it).
func (app *App) openEnv() (*Env, error) {
	if app.env != nil {
		return app.env, nil
	}
	settings, cfgErr := config.Load(app.Getenv)
	home := DataHome(app.Getenv)
	if !filepath.IsAbs(home) {
		return nil, catalog.Home.New("AGENTRUN_HOME=%s is a relative path: runs would land under whatever directory a command is run in", home).
			WithFix("set AGENTRUN_HOME to an absolute path, or unset it (default ~/.local/share/agentrun)")
	}
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	st, err := app.Deps.OpenStore(home)
	if err != nil {
		return nil, catalog.Home.Wrap(err, "%s: %v", home, err)
	}
	app.env = &Env{Home: home, Layout: layout.Layout{Home: home}, Store: st, Coord: app.Deps.Coordinator(home), Settings: settings, settingsErr: cfgErr,
		Sweepers: app.Deps.sweepers(app.Executable)}
	return app.env, nil
}

// runs is the data directory's runs as the supervisor package reaches them.
func (e *Env) runs() supervisor.Home {
	return supervisor.Home{Store: e.Store, Coord: e.Coord, Layout: e.Layout, Sweepers: e.Sweepers, Claimed: e.Claimed, Remote: e.Remote}
}
