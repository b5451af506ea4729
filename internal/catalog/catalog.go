// Package catalog holds every user-facing error: a code, what happened, the
// cause, the fix and a docs anchor, and the exit code it maps to. The CLI
// renders them in one place (text, or JSON under --json); nothing deep in
// the stack decides an exit code.
package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes (stable; documented in the README and every command's help).
const (
	ExitOK          = 0
	ExitRunFailed   = 1 // the run ended other than succeeded (submit --wait, resume --wait)
	ExitUsage       = 2 // usage, preflight or environment error (disk full, damaged record); nothing was created
	ExitNotFound    = 3 // run not found
	ExitTampered    = 4 // agentrun audit verify found the audit trail altered
	ExitInterrupted = 130
	ExitInternal    = 70 // a bug or an unexpected environment failure (not a full disk or a damaged record)
)

// KnownExit is exit if it is one of the exit codes above, else
// ExitInternal: an error that came from elsewhere (a team server's answer)
// exits as the catalog says, never with a code of its own.
func KnownExit(exit int) int {
	switch exit {
	case ExitRunFailed, ExitUsage, ExitNotFound, ExitTampered, ExitInterrupted, ExitInternal:
		return exit
	}
	return ExitInternal
}

// Error is a catalog error.
type Error struct {
	Code  string `json:"code"`
	What  string `json:"error"`
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
	Doc   string `json:"doc,omitempty"`
	Exit  int    `json:"exit_code"`
	Err   error  `json:"-"`
}

func (e *Error) Error() string {
	if e.Cause != "" {
		return e.What + ": " + e.Cause
	}
	return e.What
}

func (e *Error) Unwrap() error { return e.Err }

// Entry is a catalog template.
type Entry struct {
	Code string
	What string
	Fix  string
	Exit int
}

// New makes an error from an entry; cause is formatted with args.
func (en Entry) New(cause string, args ...any) *Error {
	if len(args) > 0 {
		cause = fmt.Sprintf(cause, args...)
	}
	return &Error{Code: en.Code, What: en.What, Cause: cause, Fix: en.Fix, Doc: DocBase + "#" + en.Code, Exit: en.Exit}
}

// Wrap is New with an underlying error kept for errors.Is/As.
func (en Entry) Wrap(err error, cause string, args ...any) *Error {
	e := en.New(cause, args...)
	e.Err = err
	return e
}

// WithFix returns a copy of e with a more specific fix.
func (e *Error) WithFix(fix string, args ...any) *Error {
	c := *e
	if len(args) > 0 {
		fix = fmt.Sprintf(fix, args...)
	}
	c.Fix = fix
	return &c
}

// Is matches by code, so errors.Is(err, catalog.RunNotFound.New("")) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// As returns the catalog error in err's chain, if any.
func As(err error) (*Error, bool) {
	var ce *Error
	if errors.As(err, &ce) {
		return ce, true
	}
	return nil, false
}

// Has reports whether err carries the catalog entry.
func Has(err error, en Entry) bool {
	ce, ok := As(err)
	return ok && ce.Code == en.Code
}

// DocBase is where the docs anchors point (the README's error section).
const DocBase = "https://github.com/agentrun/agentrun/blob/main/docs/errors.md"

// Is reports whether err is (or wraps) a catalog error of this entry.
func (en Entry) Is(err error) bool {
	ce, ok := As(err)
	return ok && ce.Code == en.Code
}

// Field names a request field in an error's text (and in a submit
// warning): ‹name›, with the field's API name (attempts, model_server).
// A client shows it in its own terms with NameFields: the CLI as its flag
// (--attempts), a server as the JSON field. The service that checks a
// request thus never speaks of flags.
func Field(name string) string { return "‹" + name + "›" }

// NameFields replaces every Field in s with name(field).
func NameFields(s string, name func(field string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "‹")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "›")
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(name(s[i+len("‹") : i+j]))
		s = s[i+j+len("›"):]
	}
	b.WriteString(s)
	return b.String()
}

// NameFields returns a copy of e with its fields named by name.
func (e *Error) NameFields(name func(field string) string) *Error {
	c := *e
	c.What, c.Cause, c.Fix = NameFields(e.What, name), NameFields(e.Cause, name), NameFields(e.Fix, name)
	return &c
}
