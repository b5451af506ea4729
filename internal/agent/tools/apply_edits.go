package tools

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed apply_edits.md
var applyEditsDesc string

var applyEdits = &Tool{
	Name:        "apply_edits",
	Description: applyEditsDesc,
	Params: []Param{
		{Name: "edits", Type: TArray, Description: "The replacements, applied in order.", Required: true, Items: []Param{
			{Name: "path", Type: TString, Description: "File path, relative to the workspace root.", Required: true},
			{Name: "old_string", Type: TString, Description: "The exact text to replace; must occur exactly once.", Required: true},
			{Name: "new_string", Type: TString, Description: "The replacement text.", Required: true},
		}},
	},
	Run: runApplyEdits,
}

type pending struct {
	orig, cur []byte
	mode      uint32
}

func runApplyEdits(ctx context.Context, env *Env, a Args) (Result, error) {
	edits := a.List("edits")
	if len(edits) == 0 {
		return Result{Kind: KindBadArguments, Output: "error: bad arguments: edits is empty"}, nil
	}
	files := map[string]*pending{}
	var order []string
	for i, e := range edits {
		path, old, nw := e.Str("path"), e.Str("old_string"), e.Str("new_string")
		fail := func(why string) (Result, error) {
			return Result{Kind: KindFailed, Output: fmt.Sprintf("error: edit %d (%s): %s; no file was changed", i+1, path, why)}, nil
		}
		if old == "" {
			return fail("old_string is empty")
		}
		p := files[path]
		if p == nil {
			st, err := env.Runner.Stat(ctx, runner.StatRequest{Path: path})
			if err != nil {
				r, herr := opResult(err, "stat "+path)
				if herr != nil {
					return r, herr
				}
				return fail(strings.TrimPrefix(r.Output, "error: "))
			}
			if !st.Exists {
				return fail("the file does not exist (use write_file to create it)")
			}
			if st.Type != "file" {
				return fail("not a regular file")
			}
			res, err := env.Runner.ReadFile(ctx, runner.ReadFileRequest{Path: path, MaxBytes: runner.DefaultWriteCap})
			if err != nil {
				r, herr := opResult(err, "read "+path)
				if herr != nil {
					return r, herr
				}
				return fail(strings.TrimPrefix(r.Output, "error: "))
			}
			p = &pending{orig: res.Data, cur: res.Data, mode: st.Mode & 0o7777}
			files[path] = p
			order = append(order, path)
		}
		s := string(p.cur)
		if strings.Count(s, old) == 0 {
			if o, ok := stripLineNumbers(old); ok && strings.Count(s, o) > 0 {
				old = o
				nw, _ = stripLineNumbers(nw)
			}
		}
		switch n := strings.Count(s, old); {
		case n == 0:
			return fail("old_string was not found; copy the text exactly, without line numbers")
		case n > 1:
			return fail(fmt.Sprintf("old_string occurs %d times; include more surrounding lines", n))
		}
		p.cur = []byte(strings.Replace(s, old, nw, 1))
	}
	var written []string
	for _, path := range order {
		p := files[path]
		if _, err := env.Runner.WriteFile(ctx, runner.WriteFileRequest{Path: path, Data: p.cur, Mode: p.mode}); err != nil {
			// Put back what was already written: all or nothing.
			for _, w := range written {
				_, _ = env.Runner.WriteFile(ctx, runner.WriteFileRequest{Path: w, Data: files[w].orig, Mode: files[w].mode})
			}
			r, herr := opResult(err, "write "+path)
			if herr != nil {
				return r, herr
			}
			r.Output += "; no file was changed"
			return r, nil
		}
		written = append(written, path)
	}
	return Result{Output: fmt.Sprintf("applied %s to %s: %s", plural(len(edits), "edit", "edits"), plural(len(order), "file", "files"), strings.Join(order, ", ")), Changed: order}, nil
}
