package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3"
// (make install does); otherwise it comes from the build info: the module
// version of `go install ...@vX`, or the commit the binary was built from.
var Version = "dev"

// pseudoVersion matches Go's pseudo-versions (v0.0.0-20261201101016-7fda8abb9c0d).
var pseudoVersion = lazyre.New(`-(0\.)?\d{14}-[0-9a-f]{12}`)

// versionInfo is what `agentrun version --json` prints.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Date     string `json:"date,omitempty"`     // commit time, RFC 3339
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: Version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	// A release installed with `go install ...@vX` names its version; a
	// build from a checkout has only a pseudo-version made of the commit,
	// which the commit below says better.
	if mv := bi.Main.Version; v.Version == "dev" && mv != "" && mv != "(devel)" && !pseudoVersion.MatchString(mv) {
		v.Version = mv
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Date = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one line `agentrun --version` and `agentrun version` print.
func (v versionInfo) String() string {
	s := "agentrun " + v.Version
	if v.Commit != "" {
		c := v.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (commit " + c
		if v.Modified {
			s += "+changes"
		}
		if v.Date != "" {
			s += ", " + v.Date
		}
		s += ")"
	}
	return s + " " + v.Go + " " + v.OS + "/" + v.Arch
}

func (app *App) newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the build's platform",
		Long: `Print agentrun's version: a release version, or "dev" with the commit and commit
time the binary was built from (from Go's build information), and the Go
version and platform. --json prints {"version", "commit", "date", "modified",
"go", "os", "arch"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return app.runVersion(cmd.Context()) },
	}
}

func (app *App) runVersion(context.Context) error {
	v := buildVersion()
	if app.JSON {
		return writeJSON(app.Stdout, v)
	}
	_, err := fmt.Fprintln(app.Stdout, v.String())
	return err
}
