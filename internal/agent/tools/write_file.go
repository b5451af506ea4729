package tools

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed write_file.md
var writeFileDesc string

var writeFile = &Tool{
	Name:        "write_file",
	Description: writeFileDesc,
	Params: []Param{
		{Name: "path", Type: TString, Description: "File path, relative to the workspace root.", Required: true},
		{Name: "content", Type: TString, Description: "The complete new content of the file.", Required: true},
	},
	Run: func(ctx context.Context, env *Env, a Args) (Result, error) {
		path := a.Str("path")
		// Keep an existing file's mode (an executable script stays one).
		var mode uint32
		if st, err := env.Runner.Stat(ctx, runner.StatRequest{Path: path}); err == nil && st.Exists && st.Type == "file" {
			mode = st.Mode & 0o7777
		}
		res, err := env.Runner.WriteFile(ctx, runner.WriteFileRequest{Path: path, Data: []byte(a.Str("content")), Mode: mode})
		if err != nil {
			return opResult(err, "write "+path)
		}
		verb := "overwrote"
		if res.Created {
			verb = "created"
		}
		return Result{Output: fmt.Sprintf("%s %s (%d bytes)", verb, path, res.Size), Changed: []string{path}}, nil
	},
}
