// Package syntax finds the lexer that highlights a file of a patch on the
// web UI's diff page, by the file's name.
//
// It keeps its own set of lexer definitions (lexers/*.xml: chroma's XML
// form, copied from chroma's lexers for the common languages, with
// chroma's licence in lexers/COPYING, plus a Go lexer written here) and
// parses them on first use. Chroma's lexers package parses all of its
// 279 definitions in its package initializer: about 10 ms and 2.7 MB in
// every process of the binary that links it, which is every agentrun
// process (the CLI, the supervisor, the sandbox's init and runner), for
// a page only the server shows. A language outside the set is shown as
// plain text.
package syntax

import (
	"embed"
	"io/fs"
	"path"
	"sync"
	"sync/atomic"

	"github.com/alecthomas/chroma/v2"
)

//go:embed lexers/*.xml
var definitions embed.FS

// registry is every lexer of the set, parsed once, on first use: all of
// them at once, since a definition may hand a part of its text to another
// by name (HTML to CSS and JavaScript, a Dockerfile to Bash).
var registry = sync.OnceValue(func() *chroma.LexerRegistry {
	builds.Add(1)
	reg := chroma.NewLexerRegistry()
	paths, _ := fs.Glob(definitions, "lexers/*.xml")
	for _, p := range paths {
		l, err := chroma.NewXMLLexer(definitions, p)
		if err != nil {
			// The set is fixed at build time and each definition is
			// parsed by the package's tests: a bad one is a build's bug.
			panic("syntax: " + p + ": " + err.Error())
		}
		reg.Register(l)
	}
	return reg
})

// builds counts the set's parses (the tests check none happens at init).
var builds atomic.Int32

// Match is the lexer for a file named name (a path: only its last element
// counts), or nil when the set has none for it.
func Match(name string) chroma.Lexer {
	return registry().Match(path.Base(name))
}

// Names are the names of the lexers of the set.
func Names() []string { return registry().Names(false) }
