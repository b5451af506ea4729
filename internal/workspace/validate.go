package workspace

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// maxPathLen caps a path or symlink target (PATH_MAX on Linux).
const maxPathLen = 4096

// Refusal reasons for paths (stable strings: they reach run.Refusal).
var (
	errPathEmpty     = errors.New("empty path")
	errPathLong      = errors.New("path too long")
	errPathUTF8      = errors.New("path is not valid UTF-8")
	errPathControl   = errors.New("path has a control character")
	errPathBackslash = errors.New("path has a backslash")
	errPathAbs       = errors.New("path is absolute")
	errPathComponent = errors.New("path has an empty, '.' or '..' component")
	errPathDotGit    = errors.New("path has a .git component")
)

// ValidatePath checks a slash-separated path relative to the workspace
// root: what export accepts is a path git stores safely on every platform.
// It refuses empty, '.' and '..' components, absolute paths, invalid UTF-8,
// NUL and other control characters, backslashes, and any component that
// git (or a case-insensitive, NTFS or HFS+ file system) would take for
// .git. The error text is the refusal reason.
func ValidatePath(p string) error {
	if err := textFault(p, errPathEmpty, errPathLong, errPathUTF8); err != nil {
		return err
	}
	if p[0] == '/' {
		return errPathAbs
	}
	for _, c := range []byte(p) {
		if c < 0x20 || c == 0x7f {
			return errPathControl
		}
		if c == '\\' {
			return errPathBackslash
		}
	}
	for comp := range strings.SplitSeq(p, "/") {
		if comp == "" || comp == "." || comp == ".." {
			return errPathComponent
		}
		if isDotGit(comp) {
			return errPathDotGit
		}
	}
	return nil
}

// Refusal reasons for symlinks.
var (
	errLinkEmpty   = errors.New("symlink target is empty")
	errLinkLong    = errors.New("symlink target too long")
	errLinkBad     = errors.New("symlink target has invalid characters")
	errLinkAbs     = errors.New("symlink target is absolute")
	errLinkEscape  = errors.New("symlink target escapes the workspace")
	errLinkForm    = errors.New("symlink target has '.', '..' or empty components after a name")
	errLinkDotGit  = errors.New("symlink target has a .git component")
	errLinkSpecial = errors.New("symlink in place of a git control file")
)

// ValidateSymlink checks the target of the symlink at path p (already a
// valid path). Accepted targets are relative, of the form
// "../"*n + "a/b/c" with n no more than the depth of the link's directory,
// and without '.', '..' or empty components after the first name, nor a
// .git component. Because no accepted link has '..' after a name, a chain of
// accepted links cannot climb out of the tree either: every '..' is taken
// from the real directory holding the link.
func ValidateSymlink(p, target string) error {
	if isGitControlFile(p[strings.LastIndexByte(p, '/')+1:]) {
		return errLinkSpecial
	}
	if err := textFault(target, errLinkEmpty, errLinkLong, errLinkBad); err != nil {
		return err
	}
	for _, c := range []byte(target) {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return errLinkBad
		}
	}
	if target[0] == '/' {
		return errLinkAbs
	}
	t := target
	if len(t) > 1 && strings.HasSuffix(t, "/") {
		t = t[:len(t)-1]
	}
	depth := strings.Count(p, "/") // directories between the root and the link
	up := 0
	named := false
	for comp := range strings.SplitSeq(t, "/") {
		switch {
		case comp == ".." && !named:
			up++
			if up > depth {
				return errLinkEscape
			}
		case comp == "" || comp == "." || comp == "..":
			return errLinkForm
		default:
			named = true
			if isDotGit(comp) {
				return errLinkDotGit
			}
		}
	}
	return nil
}

// textFault is the first check a path and a symlink target share: s must
// be non-empty, at most maxPathLen bytes and valid UTF-8. Each failure is
// reported with the caller's own reason, in that order.
func textFault(s string, empty, long, notUTF8 error) error {
	switch {
	case s == "":
		return empty
	case len(s) > maxPathLen:
		return long
	case !utf8.ValidString(s):
		return notUTF8
	}
	return nil
}

// isDotGit reports a name that git, a case-insensitive file system, NTFS
// (trailing dots and spaces, 8.3 short name, alternate data stream) or
// HFS+ (ignorable code points) would treat as ".git".
func isDotGit(name string) bool {
	return isNTFSName(name, ".git", "git~1") || foldHFS(name) == ".git"
}

// isGitControlFile reports names git refuses as symlinks (.gitmodules) or
// reads as control files (.gitattributes, .gitignore, .mailmap), in any of
// the spellings isDotGit folds.
func isGitControlFile(name string) bool {
	for _, n := range []string{".gitmodules", ".gitattributes", ".gitignore", ".mailmap"} {
		if isNTFSName(name, n, "") || foldHFS(name) == n {
			return true
		}
	}
	return strings.HasPrefix(strings.ToLower(name), "gitmod~")
}

// isNTFSName reports whether name, case-folded, is want or short (if not
// empty) followed only by dots and spaces, or by an alternate data stream
// (":...").
func isNTFSName(name, want, short string) bool {
	lower := strings.ToLower(name)
	for _, w := range []string{want, short} {
		if w == "" || !strings.HasPrefix(lower, w) {
			continue
		}
		rest := lower[len(w):]
		if i := strings.IndexByte(rest, ':'); i >= 0 {
			rest = rest[:i]
		}
		if strings.Trim(rest, ". ") == "" {
			return true
		}
	}
	return false
}

// foldHFS drops the code points HFS+ ignores and folds ASCII case.
func foldHFS(name string) string {
	var b strings.Builder
	for _, r := range name {
		if hfsIgnorable(r) {
			continue
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hfsIgnorable(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}
