package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed edit_file.md
var editFileDesc string

var editFile = &Tool{
	Name:        "edit_file",
	Description: editFileDesc,
	Params: []Param{
		{Name: "path", Type: TString, Description: "File path, relative to the workspace root.", Required: true},
		{Name: "old_string", Type: TString, Description: "The exact text to replace; must occur exactly once.", Required: true},
		{Name: "new_string", Type: TString, Description: "The replacement text.", Required: true},
	},
	Run: func(ctx context.Context, env *Env, a Args) (Result, error) {
		path, old := a.Str("path"), a.Str("old_string")
		if old == "" {
			return Result{Kind: KindBadArguments, Output: "error: bad arguments: old_string is empty; to create or replace a whole file use write_file"}, nil
		}
		if old == a.Str("new_string") {
			return Result{Kind: KindFailed, Output: "error: old_string and new_string are the same; nothing to change"}, nil
		}
		nw := a.Str("new_string")
		res, err := env.Runner.EditFile(ctx, runner.EditFileRequest{Path: path, Old: old, New: nw})
		if runner.IsCode(err, runner.CodeNoMatch) {
			// Text copied from read_file with its line numbers.
			if o, ok := stripLineNumbers(old); ok {
				n, _ := stripLineNumbers(nw)
				res, err = env.Runner.EditFile(ctx, runner.EditFileRequest{Path: path, Old: o, New: n})
			}
		}
		if err != nil {
			return editError(err, path, "old_string")
		}
		return Result{Output: fmt.Sprintf("edited %s (%d bytes)", path, res.Size), Changed: []string{path}}, nil
	},
}

func editError(err error, path, field string) (Result, error) {
	var oe *runner.OpError
	if errors.As(err, &oe) {
		switch oe.Code {
		case runner.CodeNoMatch:
			return Result{Kind: KindFailed, Output: fmt.Sprintf("error: %s was not found in %s; read the file again and copy the text exactly (whitespace included, without line numbers)", field, path)}, nil
		case runner.CodeNotUnique:
			return Result{Kind: KindFailed, Output: fmt.Sprintf("error: %s occurs more than once in %s; include more surrounding lines so it is unique", field, path)}, nil
		}
	}
	return opResult(err, "edit "+path)
}

var lineNumber = lazyre.New(`^ *\d+\t`)

// stripLineNumbers removes read_file's "   12\t" prefixes when every line
// has one; ok is false when they do not.
func stripLineNumbers(s string) (string, bool) {
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		if !lineNumber.MatchString(l) {
			return s, false
		}
	}
	for i, l := range lines {
		lines[i] = lineNumber.ReplaceAllString(l, "")
	}
	return strings.Join(lines, "\n"), true
}
