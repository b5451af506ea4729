package workspace

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

var pathCases = []struct {
	p  string
	ok bool
}{
	{"a.txt", true},
	{"src/main.go", true},
	{".github/workflows/ci.yml", true},
	{".gitignore", true},
	{".gitmodules", true},
	{"dir/.gitattributes", true},
	{"git", true},
	{"x.git", true},
	{".gitx", true},
	{"ünïcödé/файл.txt", true},
	{"", false},
	{"/etc/passwd", false},
	{"../x", false},
	{"a/../../x", false},
	{"a/./b", false},
	{"a//b", false},
	{"a/", false},
	{".", false},
	{"..", false},
	{".git", false},
	{".git/config", false},
	{"sub/.git/config", false},
	{".GIT/config", false},
	{"a/.Git", false},
	{".git./x", false},
	{".git /x", false},
	{".git . ./x", false},
	{"git~1/config", false},
	{"GIT~1", false},
	{".git::$INDEX_ALLOCATION/x", false},
	{".git:stream", false},
	{".g\u200cit/config", false},
	{"\ufeff.git/x", false},
	{".gi\u200et", false},
	{"a\\b", false},
	{"a\x00b", false},
	{"a\nb", false},
	{"a\tb", false},
	{"a\x7fb", false},
	{"bad\xff", false},
	{strings.Repeat("a/", 2100) + "x", false},
}

func TestValidatePath(t *testing.T) {
	t.Parallel()
	for _, tc := range pathCases {
		err := ValidatePath(tc.p)
		if (err == nil) != tc.ok {
			t.Errorf("ValidatePath(%q) = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

var linkCases = []struct {
	p, target string
	ok        bool
}{
	{"l", "README.md", true},
	{"l", "dir/file", true},
	{"l", "dir/", true},
	{"a/l", "../README.md", true},
	{"a/l", "..", true},
	{"a/b/l", "../../x/y", true},
	{"a/b/l", "../c", true},
	{"l", "..", false},
	{"l", "../x", false},
	{"a/l", "../../x", false},
	{"l", "/etc/passwd", false},
	{"l", "", false},
	{"l", ".", false},
	{"l", "./x", false},
	{"l", "a/../..", false},
	{"l", "a/..", false},
	{"a/l", "b/../../..", false},
	{"l", "a//b", false},
	{"l", ".git/config", false},
	{"l", "sub/.GIT", false},
	{"a/l", "../.git", false},
	{"l", "x\\y", false},
	{"l", "x\ny", false},
	{"l", "bad\xff", false},
	{".gitmodules", "x", false},
	{"a/.GITATTRIBUTES", "x", false},
	{".gitignore", "x", false},
	{"gitmod~1", "x", false},
	{"l", strings.Repeat("x", maxPathLen+1), false},
}

func TestValidateSymlink(t *testing.T) {
	t.Parallel()
	for _, tc := range linkCases {
		err := ValidateSymlink(tc.p, tc.target)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateSymlink(%q, %q) = %v, want ok=%v", tc.p, tc.target, err, tc.ok)
		}
	}
}

// looksLikeDotGit is an independent restatement of what must never pass:
// with HFS+-ignorable code points removed, an NTFS stream suffix cut, case
// folded and trailing dots and spaces trimmed, the name is ".git" or its
// 8.3 short name.
func looksLikeDotGit(comp string) bool {
	comp = strings.Map(func(r rune) rune {
		if (r >= 0x200c && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x206a && r <= 0x206f) || r == 0xfeff {
			return -1
		}
		return r
	}, comp)
	if i := strings.IndexByte(comp, ':'); i >= 0 {
		comp = comp[:i]
	}
	s := strings.TrimRight(strings.ToLower(comp), ". ")
	return s == ".git" || s == "git~1"
}

func FuzzValidatePath(f *testing.F) {
	for _, tc := range pathCases {
		f.Add(tc.p, "x")
	}
	for _, tc := range linkCases {
		f.Add(tc.p, tc.target)
	}
	f.Fuzz(func(t *testing.T, p, target string) {
		if ValidatePath(p) != nil {
			return
		}
		// An accepted path is clean, relative, printable UTF-8, stays in
		// the tree and has no .git component.
		if !utf8.ValidString(p) || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." {
			t.Fatalf("accepted %q", p)
		}
		if strings.ContainsAny(p, "\x00\\\n\r") {
			t.Fatalf("accepted %q", p)
		}
		for _, comp := range strings.Split(p, "/") {
			if looksLikeDotGit(comp) || comp == ".." || comp == "." || comp == "" {
				t.Fatalf("accepted %q with component %q", p, comp)
			}
		}
		if ValidateSymlink(p, target) != nil {
			return
		}
		// An accepted link resolves (lexically, from its directory) inside
		// the tree, and never into a .git directory.
		if path.IsAbs(target) {
			t.Fatalf("accepted absolute link %q -> %q", p, target)
		}
		res := path.Join(path.Dir(p), target)
		if res == ".." || strings.HasPrefix(res, "../") {
			t.Fatalf("accepted escaping link %q -> %q (%s)", p, target, res)
		}
		for _, comp := range strings.Split(res, "/") {
			if looksLikeDotGit(comp) {
				t.Fatalf("accepted link into .git: %q -> %q", p, target)
			}
		}
		// No '..' after a name: chains cannot climb.
		named := false
		for _, comp := range strings.Split(strings.TrimSuffix(target, "/"), "/") {
			if comp != ".." {
				named = true
			} else if named {
				t.Fatalf("accepted '..' after a name: %q -> %q", p, target)
			}
		}
	})
}
