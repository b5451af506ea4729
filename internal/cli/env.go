package cli

import (
	"path/filepath"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/store/files"
)

// Env is the resolved environment of a command: data directory,
// configuration and the run store. Config precedence: flag > environment >
// config file > default (flags are applied by each command on top of
// Settings).
type Env struct {
	Home     string
	Layout   layout.Layout
	Store    *files.Store
	Settings config.Settings
}

// DataHome is the data directory: AGENTRUN_HOME, else
// $XDG_DATA_HOME/agentrun, else ~/.local/share/agentrun.
func DataHome(getenv func(string) string) string {
	if h := getenv("AGENTRUN_HOME"); h != "" {
		return h
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "agentrun")
	}
	return filepath.Join(getenv("HOME"), ".local", "share", "agentrun")
}

// openEnv resolves the environment once per command (owned by the
// core/submit work; other commands only call it).
func (app *App) openEnv() (*Env, error) {
	if app.env != nil {
		return app.env, nil
	}
	settings, err := config.Load(app.Getenv)
	if err != nil {
		return nil, err
	}
	home := DataHome(app.Getenv)
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	st, err := files.Open(home)
	if err != nil {
		return nil, catalog.Home.Wrap(err, "%s: %v", home, err)
	}
	app.env = &Env{Home: home, Layout: layout.Layout{Home: home}, Store: st, Settings: settings}
	return app.env, nil
}
