package cli

import (
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/store/files"
)

// Env is the resolved environment of a command: data directory,
// configuration and the run store. Config precedence: flag > environment >
// config file > default.
type Env struct {
	Home   string
	Layout layout.Layout
	Store  *files.Store
}

// env resolves the environment once per command (owned by the core/submit
// work; other commands only call it).
func (app *App) openEnv() (*Env, error) {
	if app.env != nil {
		return app.env, nil
	}
	home := app.Getenv("AGENTRUN_HOME")
	if home == "" {
		if x := app.Getenv("XDG_DATA_HOME"); x != "" {
			home = x + "/agentrun"
		} else {
			home = app.Getenv("HOME") + "/.local/share/agentrun"
		}
	}
	st, err := files.Open(home)
	if err != nil {
		return nil, err
	}
	app.env = &Env{Home: home, Layout: layout.Layout{Home: home}, Store: st}
	return app.env, nil
}
