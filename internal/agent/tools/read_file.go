package tools

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/runner"
)

//go:embed read_file.md
var readFileDesc string

const (
	readDefaultLines = 2000
	readMaxLineChars = 2000
	readMaxBytes     = 8 << 20
)

var readFile = &Tool{
	Name:        "read_file",
	Description: readFileDesc,
	Params: []Param{
		{Name: "path", Type: TString, Description: "File path, relative to the workspace root.", Required: true},
		{Name: "offset", Type: TInteger, Description: "First line to read, 1-based (default 1)."},
		{Name: "limit", Type: TInteger, Description: "Number of lines to read (default 2000)."},
	},
	Run: runReadFile,
}

func runReadFile(ctx context.Context, env *Env, a Args) (Result, error) {
	path := a.Str("path")
	offset := a.Int("offset", 1)
	limit := a.Int("limit", readDefaultLines)
	if offset < 1 {
		offset = 1
	}
	if limit < 1 {
		limit = readDefaultLines
	}
	var data []byte
	var size int64
	if strings.HasPrefix(path, SpillPrefix) {
		b, err := readSpill(env, path)
		if err != nil {
			return opResult(err, "read "+path)
		}
		data, size = b, int64(len(b))
	} else {
		res, err := env.Runner.ReadFile(ctx, runner.ReadFileRequest{Path: path, Limit: readMaxBytes})
		if err != nil {
			return opResult(err, "read "+path)
		}
		data, size = res.Data, res.Size
	}
	head := data
	if len(head) > 8000 {
		head = head[:8000]
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return Result{Kind: KindFailed, Output: fmt.Sprintf("error: %s is a binary file (%d bytes); it cannot be shown as text", path, size)}, nil
	}
	if len(data) == 0 {
		return Result{Output: fmt.Sprintf("(%s is empty)", path)}, nil
	}
	text := string(data)
	text = strings.TrimSuffix(text, "\n")
	lines := strings.Split(text, "\n")
	total := int64(len(lines))
	if offset > total {
		return Result{Kind: KindFailed, Output: fmt.Sprintf("error: offset %d is past the end of %s (%d lines)", offset, path, total)}, nil
	}
	end := offset - 1 + limit
	if end > total {
		end = total
	}
	var b strings.Builder
	for i := offset - 1; i < end; i++ {
		l := strings.TrimSuffix(lines[i], "\r")
		if len(l) > readMaxLineChars {
			l = l[:readMaxLineChars] + "… (line cut)"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
	}
	if offset > 1 || end < total || int64(len(data)) < size {
		fmt.Fprintf(&b, "(lines %d-%d of %d", offset, end, total)
		if int64(len(data)) < size {
			fmt.Fprintf(&b, " in the first %d of %d bytes", len(data), size)
		}
		b.WriteString("; use offset and limit to read more)\n")
	}
	return Result{Output: b.String()}, nil
}
