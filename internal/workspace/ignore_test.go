package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestIgnoreMatching(t *testing.T) {
	t.Parallel()
	root := parseIgnore("", []byte(strings.Join([]string{
		"# comment",
		"*.log",
		"!keep.log",
		"/build",
		"out/",
		"**/tmp",
		"docs/**/*.html",
		"a/b",
		`\#hash`,
		"trailing   ",
		"[!x]y.bak",
		"",
	}, "\n")), maxIgnorePatterns)
	sub := parseIgnore("sub/", []byte("*.txt\n!*.log\n/local\n"), maxIgnorePatterns)
	stack := ignoreStack{root, sub}
	for _, tc := range []struct {
		p   string
		dir bool
		ign bool
	}{
		{"x.log", false, true},
		{"deep/x.log", false, true},
		{"keep.log", false, false},
		{"build", true, true},
		{"build", false, true},
		{"src/build", true, false},
		{"out", true, true},
		{"out", false, false},
		{"src/out", true, true},
		{"tmp", true, true},
		{"a/b/tmp", true, true},
		{"docs/x.html", false, true},
		{"docs/a/b/x.html", false, true},
		{"other/docs/x.html", false, false},
		{"a/b", false, true},
		{"x/a/b", false, false},
		{"#hash", false, true},
		{"trailing", false, true},
		{"ay.bak", false, true},
		{"xy.bak", false, false},
		{"main.go", false, false},
		{"sub/a.txt", false, true},
		{"a.txt", false, false},
		{"sub/x.log", false, false}, // the deeper file re-includes
		{"sub/local", false, true},
		{"sub/deeper/local", false, false},
	} {
		if got := stack.ignored(tc.p, tc.dir); got != tc.ign {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", tc.p, tc.dir, got, tc.ign)
		}
	}
}

func TestScanHonoursIgnoreRules(t *testing.T) {
	t.Parallel()
	repo, _ := newRepo(t)
	writeFile(t, filepath.Join(repo, ".gitignore"), "node_modules/\n*.pyc\nvendor/\n", 0o644)
	writeFile(t, filepath.Join(repo, "vendor", "tracked.go"), "package vendor\n", 0o644)
	testsupport.Git(t, repo, "add", "-f", "-A")
	testsupport.Git(t, repo, "commit", "-q", "-m", "ignores")
	base := testsupport.Git(t, repo, "rev-parse", "HEAD")
	ws, dir := newWorkspace(t, repo, base)

	// What a build leaves: more files than the limit, a FIFO, a nested
	// repository, all ignored.
	for i := range 50 {
		writeFile(t, filepath.Join(dir, "node_modules", "pkg", "f"+strings.Repeat("x", i)+".js"), "x", 0o644)
	}
	writeFile(t, filepath.Join(dir, "node_modules", "dep", ".git", "config"), "[core]\n", 0o644)
	writeFile(t, filepath.Join(dir, "src", "__pycache__", "m.pyc"), "\x00bytecode", 0o644)
	writeFile(t, filepath.Join(dir, "vendor", "new.go"), "package vendor\n", 0o644)          // untracked in an ignored dir
	writeFile(t, filepath.Join(dir, "vendor", "tracked.go"), "package vendor // x\n", 0o644) // tracked: still seen
	writeFile(t, filepath.Join(dir, "scratch.tmp"), "x", 0o644)
	writeFile(t, filepath.Join(dir, ".git", "info", "exclude"), "*.tmp\n", 0o644)
	writeFile(t, filepath.Join(dir, "sub", ".gitignore"), "*\n!.gitignore\n", 0o644)
	writeFile(t, filepath.Join(dir, "sub", "hidden.txt"), "x", 0o644)
	// A symlinked .gitignore is not read (so lib/a.txt stays visible).
	writeFile(t, filepath.Join(dir, "lib", "a.txt"), "a\n", 0o644)
	if err := os.Symlink("../sub/.gitignore", filepath.Join(dir, "lib", ".gitignore")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "new.go"), "package main\n", 0o644)

	cs := scanWS(t, ws, Limits{MaxFiles: 20})
	got := kinds(cs)
	want := map[string]string{
		"vendor/tracked.go": "modify 100644",
		"sub/.gitignore":    "add 100644",
		"lib/a.txt":         "add 100644",
		"new.go":            "add 100644",
	}
	for _, k := range sortedKeys(want) {
		if got[k] != want[k] {
			t.Errorf("%s: %q, want %q", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("changes = %v", got)
	}
	// The symlinked .gitignore is itself refused (a git control file).
	if r := refusedPaths(cs); len(r) != 1 || r["lib/.gitignore"] == "" {
		t.Errorf("refused = %v", r)
	}
}

func TestIgnorePathologicalPatterns(t *testing.T) {
	t.Parallel()
	// Many "**" against a deep path: linear-time matching, right answers.
	deep := strings.Repeat("a/", 300) + "b"
	pat := strings.Repeat("**/a/", 40) + "**/c"
	l := parseIgnore("", []byte(pat+"\n"+strings.Repeat("**/", 60)+"b\n"), maxIgnorePatterns)
	if !(ignoreStack{l}).ignored(deep, false) {
		t.Fatal("**/…/b should match")
	}
	l = parseIgnore("", []byte(pat+"\n"), maxIgnorePatterns)
	if (ignoreStack{l}).ignored(deep, false) {
		t.Fatal("…/c should not match")
	}
	// The budget caps patterns.
	many := strings.Repeat("x\n", 50)
	if l := parseIgnore("", []byte(many), 7); len(l.patterns) != 7 {
		t.Fatalf("budget: %d patterns", len(l.patterns))
	}
	// Blank-after-trim and lone "!" lines do not panic.
	parseIgnore("", []byte("   \n!\n/\n!/\n\\\n"), maxIgnorePatterns)
}

func TestReadNamesLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		writeFile(t, filepath.Join(dir, n), "", 0o644)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(fd) }()
	if _, err := readNames(fd, 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("readNames over the limit: %v", err)
	}
}

func FuzzIgnore(f *testing.F) {
	f.Add("*.log\n!keep.log\n/build\nout/\n**/tmp\n", "a/b/x.log", true)
	f.Add("**/**/**/a\n[!x]y\n\\#x\n", "q/a", false)
	f.Add("[\n\\\n!\n", "[", true)
	f.Fuzz(func(t *testing.T, rules, p string, dir bool) {
		l := parseIgnore("", []byte(rules), maxIgnorePatterns)
		for _, pt := range l.patterns {
			if len(pt.segs) == 0 {
				t.Fatalf("pattern without components from %q", rules)
			}
		}
		_ = ignoreStack{l}.ignored(p, dir)
	})
}
