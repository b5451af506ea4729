package workspace

import (
	"path"
	"strings"
)

// Untracked paths that the workspace's own ignore rules exclude (what the
// agent's build left behind: node_modules/, __pycache__/, target/) are not
// changes: like git status, the scan skips them, and never descends into an
// ignored directory that holds no tracked file. Tracked paths are never
// ignored. The rules come from the .gitignore files of the tree as the agent
// left it and from the workspace's .git/info/exclude, read as data with the
// same symlink-safe calls as any other file. Ignoring can only drop content
// from the export, never add any, so trusting the agent's rules is safe.

// Caps on the agent's ignore rules, so that a hostile .gitignore cannot
// make the scan slow: past them, rules are dropped (which can only make the
// scan report more, never less).
const (
	maxIgnoreFile     = 64 << 10 // bytes of one ignore file
	maxIgnorePatterns = 10000    // patterns of one scan, all files together
)

// ignorePattern is one line of an ignore file.
type ignorePattern struct {
	segs     []string // pattern split on '/'
	negate   bool     // "!pattern"
	dirOnly  bool     // "pattern/"
	basename bool     // no slash: matches the last component at any depth
}

// ignoreList is the patterns of one file, relative to base ("" or "dir/").
type ignoreList struct {
	base     string
	patterns []ignorePattern
}

// parseIgnore reads gitignore syntax, at most budget patterns.
func parseIgnore(base string, data []byte, budget int) *ignoreList {
	l := &ignoreList{base: base}
	for line := range strings.SplitSeq(string(data), "\n") {
		if len(l.patterns) >= budget {
			break
		}
		line = strings.TrimSuffix(line, "\r")
		// Trailing spaces are dropped unless escaped.
		for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
			line = line[:len(line)-1]
		}
		if line == "" || line[0] == '#' {
			continue
		}
		var p ignorePattern
		if line[0] == '!' {
			p.negate = true
			line = line[1:]
		} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			p.dirOnly = true
			line = strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if !strings.Contains(line, "/") {
			p.basename = true
		}
		line = strings.TrimPrefix(line, "/")
		line = strings.ReplaceAll(line, "[!", "[^")
		p.segs = strings.Split(line, "/")
		l.patterns = append(l.patterns, p)
	}
	return l
}

// ignoreStack is the ignore lists in force in one directory, lowest
// precedence first (info/exclude, then .gitignore files from the root
// down).
type ignoreStack []*ignoreList

// ignored reports whether the untracked path p (a directory if dir) is
// excluded: the last matching pattern of the deepest list decides.
func (s ignoreStack) ignored(p string, dir bool) bool {
	for i := len(s) - 1; i >= 0; i-- {
		l := s[i]
		rel, ok := strings.CutPrefix(p, l.base)
		if !ok {
			continue
		}
		for j := len(l.patterns) - 1; j >= 0; j-- {
			pt := &l.patterns[j]
			if pt.dirOnly && !dir {
				continue
			}
			if pt.matches(rel) {
				return !pt.negate
			}
		}
	}
	return false
}

func (pt *ignorePattern) matches(rel string) bool {
	if pt.basename {
		return segMatch(pt.segs[0], rel[strings.LastIndexByte(rel, '/')+1:])
	}
	return matchSegs(pt.segs, strings.Split(rel, "/"))
}

// matchSegs matches path components against pattern components, where a
// "**" component matches any number of path components. It is the classic
// wildcard match with one backtrack point, O(len(pat)*len(p)) whatever the
// pattern.
func matchSegs(pat, p []string) bool {
	pi, si := 0, 0
	star, starSi := -1, 0
	for si < len(p) {
		switch {
		case pi < len(pat) && pat[pi] == "**":
			star, starSi = pi, si
			pi++
		case pi < len(pat) && segMatch(pat[pi], p[si]):
			pi++
			si++
		case star >= 0:
			pi = star + 1
			starSi++
			si = starSi
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == "**" {
		pi++
	}
	return pi == len(pat)
}

func segMatch(pat, name string) bool {
	ok, _ := path.Match(pat, name)
	return ok
}
