// Package lazyre holds regular expressions that are compiled on their first
// use instead of at process start.
//
// Every agentrun process (the CLI, the detached supervisor, the sandbox's
// pid 1) runs the initializers of every package in the binary, whatever its
// role. Patterns compiled by package-level regexp.MustCompile calls cost
// each of those starts about a millisecond, mostly for patterns the role
// never uses. internal/archtest keeps such calls out of the module and
// compiles every pattern given to New, so a bad pattern still fails a test
// rather than a user's command.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a pattern compiled on first use; it is safe for concurrent use.
type Regexp struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

// New returns src, to be compiled when first used (it panics then if src
// is not a valid pattern, as regexp.MustCompile would).
func New(src string) *Regexp { return &Regexp{src: src} }

// compiled is the compiled pattern.
func (r *Regexp) compiled() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.src) })
	return r.re
}

// MatchString reports whether s contains a match of the pattern.
func (r *Regexp) MatchString(s string) bool { return r.compiled().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.compiled().FindStringSubmatch(s) }

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.compiled().ReplaceAllString(src, repl)
}

// FindAllString is regexp.Regexp.FindAllString.
func (r *Regexp) FindAllString(s string, n int) []string { return r.compiled().FindAllString(s, n) }
