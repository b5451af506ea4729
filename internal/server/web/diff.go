package web

import (
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/server/web/syntax"
	"github.com/alecthomas/chroma/v2"
)

// The diff page shows at most this much of a patch, and highlights a
// file's hunks only up to highlightLines lines (beyond, plain text): the
// patch is the agent's, and may be made to be slow to lex.
const (
	maxDiffBytes   = 4 << 20
	highlightLines = 5000
)

// diffFile is one file of a patch, as the run page shows it.
type diffFile struct {
	Name   string
	Meta   []string // git's header lines: new file, mode, rename, binary
	Lines  []diffLine
	Binary bool
}

// diffLine is one line of a hunk, or a hunk's header (Kind "hunk").
type diffLine struct {
	Kind   string // add, del, ctx, hunk
	Mark   string // +, - or a space
	Tokens []token
}

// token is highlighted text: Class is a chroma CSS class ("" for none).
// The text is escaped by the template like every other string.
type token struct{ Class, Text string }

// renderDiff splits a patch into files and highlights each by the
// language its name suggests; the note says what was left out.
func renderDiff(patch string) ([]diffFile, string) {
	note := ""
	if len(patch) > maxDiffBytes {
		patch = patch[:maxDiffBytes]
		if i := strings.LastIndexByte(patch, '\n'); i > 0 {
			patch = patch[:i+1]
		}
		note = "The patch is larger than the page shows: the rest is in GET /v1/runs/{id}/diff."
	}
	if strings.TrimSpace(patch) == "" {
		return nil, "The run changed no files."
	}
	var files []diffFile
	var f *diffFile
	var hunk []string // the current hunk's lines, mark first
	flush := func() {
		if f != nil && len(hunk) > 0 {
			f.Lines = append(f.Lines, highlight(f.Name, hunk)...)
		}
		hunk = nil
	}
	for _, l := range strings.Split(strings.TrimSuffix(patch, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			flush()
			files = append(files, diffFile{Name: gitHeaderName(l)})
			f = &files[len(files)-1]
		case f == nil:
			continue
		case strings.HasPrefix(l, "@@"):
			flush()
			f.Lines = append(f.Lines, diffLine{Kind: "hunk", Tokens: []token{{Text: l}}})
			hunk = []string{}
		case hunk != nil && (l == "" || strings.ContainsRune("+- \\", rune(l[0]))):
			hunk = append(hunk, l)
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
			if n := pathName(l[4:]); n != "" {
				f.Name = n
			}
		case strings.HasPrefix(l, "index "):
		case strings.HasPrefix(l, "Binary files "):
			f.Binary = true
			f.Meta = append(f.Meta, "binary file")
		default:
			f.Meta = append(f.Meta, l)
		}
	}
	flush()
	return files, note
}

// gitHeaderName is the b/ name of a "diff --git a/X b/Y" line (a guess
// when the names hold spaces; the ---/+++ lines correct it).
func gitHeaderName(l string) string {
	rest := strings.TrimPrefix(l, "diff --git ")
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return rest
}

// pathName is the name of a ---/+++ line's a/X or b/X ("" for /dev/null).
func pathName(s string) string {
	s = strings.TrimSuffix(s, "\t")
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			s = u
		}
	}
	if s == "/dev/null" {
		return ""
	}
	if len(s) > 2 && (strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/")) {
		return s[2:]
	}
	return s
}

// kindOf is a hunk line's kind by its mark ("\ No newline at end of
// file" is shown as context).
var kindOf = map[byte]string{'+': "add", '-': "del", ' ': "ctx", '\\': "ctx"}

// highlight lexes one hunk's text as the language of name.
func highlight(name string, hunk []string) []diffLine {
	out := make([]diffLine, len(hunk))
	var text strings.Builder
	for i, l := range hunk {
		mark := byte(' ')
		if l != "" {
			mark, l = l[0], l[1:]
		}
		out[i] = diffLine{Kind: kindOf[mark], Mark: string(mark), Tokens: []token{{Text: l}}}
		if mark == '\\' {
			l = ""
		}
		text.WriteString(l)
		text.WriteByte('\n')
	}
	lexer := syntax.Match(name)
	if lexer == nil || len(hunk) > highlightLines {
		return out
	}
	toks, err := chroma.Coalesce(lexer).Tokenise(nil, text.String())
	if err != nil {
		return out
	}
	lines := chroma.SplitTokensIntoLines(toks.Tokens())
	if len(lines) < len(hunk) {
		return out
	}
	for i := range out {
		if hunk[i] != "" && hunk[i][0] == '\\' {
			continue
		}
		var ts []token
		for _, t := range lines[i] {
			if v := strings.TrimSuffix(t.Value, "\n"); v != "" {
				ts = append(ts, token{Class: tokenClass(t.Type), Text: v})
			}
		}
		out[i].Tokens = ts
	}
	return out
}

// tokenClass is chroma's short CSS class of a token type, as its HTML
// formatter names them (the style sheet, static/chroma.css, is chroma's
// "github" style as its HTML formatter writes it: kept as a file, so
// that chroma's styles package, 8 ms of init in every agentrun process,
// is not linked in).
func tokenClass(t chroma.TokenType) string {
	for ; t != 0; t = t.Parent() {
		if c, ok := chroma.StandardTypes[t]; ok {
			return c
		}
	}
	return ""
}
