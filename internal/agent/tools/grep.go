package tools

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed grep.md
var grepDesc string

var grepTool = &Tool{
	Name:        "grep",
	Description: grepDesc,
	Params: []Param{
		{Name: "pattern", Type: TString, Description: "Regular expression to search for.", Required: true},
		{Name: "path", Type: TString, Description: "Directory or file to search (default: the workspace root)."},
		{Name: "glob", Type: TString, Description: "Only files whose name or relative path matches this glob, e.g. \"*.go\"."},
		{Name: "ignore_case", Type: TBoolean, Description: "Match case-insensitively."},
		{Name: "limit", Type: TInteger, Description: "Maximum number of matches (default 200)."},
	},
	Run: func(ctx context.Context, env *Env, a Args) (Result, error) {
		pat := a.Str("pattern")
		if _, err := regexp.Compile(pat); err != nil {
			return Result{Kind: KindBadArguments, Output: "error: bad arguments: pattern is not a valid regular expression: " + err.Error()}, nil
		}
		limit := a.Int("limit", 200)
		if limit < 1 || limit > 2000 {
			limit = 200
		}
		res, err := env.Runner.Grep(ctx, runner.GrepRequest{Pattern: pat, Path: a.Str("path"), Glob: a.Str("glob"), IgnoreCase: a.Bool("ignore_case"), Limit: int(limit)})
		if err != nil {
			return opResult(err, "grep")
		}
		var b strings.Builder
		for _, m := range res.Matches {
			t := m.Text
			if len(t) > 500 {
				t = t[:500] + "…"
			}
			fmt.Fprintf(&b, "%s:%d: %s\n", m.Path, m.Line, t)
		}
		if len(res.Matches) == 0 {
			b.WriteString("(no matches)\n")
		}
		if res.Truncated {
			fmt.Fprintf(&b, "(stopped at %d matches; narrow the search)\n", limit)
		}
		return Result{Output: b.String()}, nil
	},
}
