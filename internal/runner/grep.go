package runner

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

const (
	defaultGrepLimit = 200
	maxGrepFileSize  = 8 << 20
	maxGrepLineText  = 500
	binarySniff      = 8000
	// maxGrepBytes bounds the bytes one grep reads; past it the result is
	// Truncated.
	maxGrepBytes = 512 << 20
)

func (s *server) grep(ctx context.Context, req *GrepRequest) (*GrepResult, error) {
	pat := req.Pattern
	if req.IgnoreCase {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, &OpError{Code: CodeBadRequest, Message: "bad pattern: " + err.Error()}
	}
	if req.Glob != "" {
		if _, err := path.Match(strings.ReplaceAll(req.Glob, "**", "*"), ""); err != nil {
			return nil, &OpError{Code: CodeBadRequest, Message: "bad glob: " + err.Error()}
		}
	}
	limit := req.Limit
	if limit <= 0 {
		limit = defaultGrepLimit
	}
	rel, err := s.rel(req.Path)
	if err != nil {
		return nil, err
	}
	res := &GrepResult{Matches: []GrepMatch{}}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return nil, fsErr(req.Path, err)
	}
	if !fi.IsDir() {
		s.grepFile(re, rel, slashRel(".", rel), res, limit)
		return res, nil
	}
	sub, err := s.root.OpenRoot(rel)
	if err != nil {
		return nil, fsErr(req.Path, err)
	}
	defer sub.Close()
	fsys := sub.FS()
	var budget int64 = maxGrepBytes
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if p == "." {
				return err
			}
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != "." {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !globMatch(req.Glob, p) {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if budget -= min(info.Size(), maxGrepFileSize); budget < 0 {
				res.Truncated = true
				return fs.SkipAll
			}
		}
		if !s.grepFile(re, slashRel(rel, p), slashRel(rel, p), res, limit) {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return nil, fsErr(req.Path, err)
	}
	return res, nil
}

// grepFile appends the matches in one file (rel to Root); it returns false
// once the limit is reached.
func (s *server) grepFile(re *regexp.Regexp, rel, shown string, res *GrepResult, limit int) bool {
	f, fi, err := s.openRegular(rel, rel)
	if err != nil {
		return true
	}
	defer f.Close()
	if fi.Size() > maxGrepFileSize {
		return true
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniff)
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	for line := 1; ; line++ {
		text, err := br.ReadString('\n')
		if len(text) > 0 {
			text = strings.TrimRight(text, "\r\n")
			if re.MatchString(text) {
				if len(res.Matches) >= limit {
					res.Truncated = true
					return false
				}
				if len(text) > maxGrepLineText {
					text = text[:maxGrepLineText]
				}
				res.Matches = append(res.Matches, GrepMatch{Path: shown, Line: line, Text: text})
			}
		}
		if err == io.EOF || err != nil {
			return true
		}
	}
}

// globMatch matches a glob against a slash-separated relative path: a
// glob without a slash matches the base name; one with a slash matches the
// whole path, where a "**" segment matches any number of segments.
func globMatch(glob, p string) bool {
	if glob == "" {
		return true
	}
	if !strings.Contains(glob, "/") {
		ok, _ := path.Match(glob, path.Base(p))
		return ok
	}
	return matchSegments(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func matchSegments(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			g = g[1:]
			if len(g) == 0 {
				return true
			}
			for i := 0; i <= len(p); i++ {
				if matchSegments(g, p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}
