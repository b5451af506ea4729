package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/config"
)

// configOutput is what `agentrun config --json` prints.
type configOutput struct {
	// Path is the config file consulted; Exists whether it is there.
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	// DataDirectory is where runs live, and where that came from.
	DataDirectory       string           `json:"data_directory"`
	DataDirectorySource string           `json:"data_directory_source"`
	Settings            []config.Setting `json:"settings"`
}

func (app *App) newConfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Show the effective configuration and where each value comes from",
		Long: `Show the effective configuration: every setting's value and its source (a
flag given to a command still overrides it), by precedence environment >
config file > default, and the [model_servers], [providers] and [prices]
entries of the file. Keys are named by where they come from (a variable, a
file, a command), never printed.

--json prints {"path", "exists", "data_directory", "data_directory_source",
"settings": [{"key", "value", "source", "env"}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return app.runConfig(cmd.Context()) },
	}
}

func (app *App) runConfig(context.Context) error {
	settings, err := config.Explain(app.Getenv)
	if err != nil {
		return err
	}
	out := configOutput{Path: config.Path(app.Getenv), DataDirectory: DataHome(app.Getenv), Settings: settings}
	_, statErr := os.Stat(out.Path)
	out.Exists = statErr == nil
	switch {
	case app.Getenv("AGENTRUN_HOME") != "":
		out.DataDirectorySource = "environment AGENTRUN_HOME"
	case app.Getenv("XDG_DATA_HOME") != "":
		out.DataDirectorySource = "environment XDG_DATA_HOME"
	default:
		out.DataDirectorySource = "default"
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	file := out.Path
	if !out.Exists {
		file += " (not present)"
	}
	fmt.Fprintf(app.Stdout, "config file     %s\n", app.tildePath(file))
	home := out.DataDirectory
	if !filepath.IsAbs(home) {
		home += " (relative: set an absolute path)"
	}
	fmt.Fprintf(app.Stdout, "data directory  %s (%s)\n\n", app.tildePath(home), out.DataDirectorySource)
	t := table{header: []string{"KEY", "VALUE", "SOURCE"}, colour: app.colour()}
	for _, s := range out.Settings {
		v := s.Value
		if v == "" {
			v = "-"
		}
		t.add(s.Key, oneLine(v, 70), s.Source)
	}
	return t.write(app.Stdout)
}
