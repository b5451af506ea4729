package tools

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed list_dir.md
var listDirDesc string

var listDir = &Tool{
	Name:        "list_dir",
	Description: listDirDesc,
	Params: []Param{
		{Name: "path", Type: TString, Description: "Directory path, relative to the workspace root (default: the root)."},
		{Name: "recursive", Type: TBoolean, Description: "List the whole tree below the directory."},
	},
	Run: func(ctx context.Context, env *Env, a Args) (Result, error) {
		path := a.Str("path")
		if path == "" {
			path = "."
		}
		res, err := env.Runner.ListDir(ctx, runner.ListDirRequest{Path: path, Recursive: a.Bool("recursive"), Limit: 1000})
		if err != nil {
			return opResult(err, "list "+path)
		}
		var b strings.Builder
		for _, e := range res.Entries {
			switch e.Type {
			case "dir":
				fmt.Fprintf(&b, "%s/\n", e.Name)
			case "symlink":
				fmt.Fprintf(&b, "%s@\n", e.Name)
			default:
				fmt.Fprintf(&b, "%s  (%d bytes)\n", e.Name, e.Size)
			}
		}
		if len(res.Entries) == 0 {
			b.WriteString("(empty directory)\n")
		}
		if res.Truncated {
			b.WriteString("(listing truncated at 1000 entries; list a subdirectory)\n")
		}
		return Result{Output: b.String()}, nil
	},
}
