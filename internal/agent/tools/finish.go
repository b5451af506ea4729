package tools

import (
	"context"
	_ "embed"
)

//go:embed finish.md
var finishDesc string

var finishTool = &Tool{
	Name:        "finish",
	Description: finishDesc,
	Params: []Param{
		{Name: "summary", Type: TString, Description: "What was done, for the reviewer.", Required: true},
	},
	Run: func(ctx context.Context, env *Env, a Args) (Result, error) {
		return Result{Output: "finished", Finish: true, Summary: a.Str("summary")}, nil
	},
}
