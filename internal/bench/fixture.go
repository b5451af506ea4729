package bench

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

// The files of a fixture directory.
const (
	TaskFile     = "task.md"
	ConfigFile   = "fixture.toml"
	AcceptScript = "accept.sh"
	RepoDir      = "repo"
	SolutionDir  = "solution"
	// SolutionDelete lists, one a line, the paths the solution removes.
	SolutionDelete = "solution.delete"
	txtarSuffix    = ".txtar"
)

// Absent is the expect value of a path the result must not have.
const Absent = "absent"

// Bounds on what a fixture directory may hold in memory: a larger
// repository is named with repo = PATH instead.
const (
	maxFixtureBytes = 32 << 20
	maxFixtureFiles = 10000
)

// Fixture is one bench task: the task text, the repository it starts
// from, and how its result is judged.
type Fixture struct {
	Name     string
	Source   string // where it was read (a directory, or "builtin")
	Language string
	Task     string
	// Accept is the acceptance command (sh -c in the result tree's root).
	Accept string
	// Script is accept.sh, nil when Accept comes from fixture.toml. It is
	// committed at the root of a repository made from repo/, so the agent
	// sees how it is judged, and written over the result tree before the
	// acceptance runs, so the script that runs is always the fixture's.
	Script []byte
	// Protected are the paths besides accept.sh the agent must leave as
	// they are in the base commit (the tests the acceptance runs).
	Protected []string
	// Expect maps a path of the result to "sha256:HEX" (its content) or
	// Absent.
	Expect map[string]string
	// Repo is an existing repository the runs start from ("" = Files);
	// Base its base (default HEAD).
	Repo string
	Base string
	// Files are repo/'s content, made a repository at run time.
	Files []File
	// Solution and Delete turn the base into a tree that passes (for
	// checking the fixture itself; never shown to an agent).
	Solution []File
	Delete   []string
	// Run settings: zero means the bench's.
	Timeout       time.Duration
	AcceptTimeout time.Duration
	Attempts      int
	Checks        []run.CheckSpec
	// Digest is a hash of everything a run of the fixture sees and is
	// judged by: results of different versions of a fixture differ in it.
	Digest string
}

// File is one file of a fixture's repository.
type File struct {
	Path string // slash-separated, relative
	Data []byte
	Exec bool
}

// AcceptFiles are the paths whose change makes a run gamed: accept.sh
// (when the fixture has one) and the protected paths.
func (f *Fixture) AcceptFiles() []string {
	var out []string
	if f.Script != nil {
		out = append(out, AcceptScript)
	}
	return append(out, f.Protected...)
}

// config is fixture.toml.
type config struct {
	Language      string            `toml:"language"`
	Accept        string            `toml:"accept"`
	Protected     []string          `toml:"protected"`
	Expect        map[string]string `toml:"expect"`
	Repo          string            `toml:"repo"`
	Base          string            `toml:"base"`
	Timeout       string            `toml:"timeout"`
	AcceptTimeout string            `toml:"accept_timeout"`
	Attempts      int               `toml:"attempts"`
	Checks        map[string]string `toml:"checks"`
}

var nameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Discover finds the fixtures under root of fsys: every directory holding
// a task.md (not looked into further), in name order. realRoot is root's
// path on disk ("" for an embedded set: its fixtures cannot name a repo
// by path); source names the set in messages. Two fixtures of one name
// are an error.
func Discover(fsys fs.FS, root, realRoot, source string) ([]*Fixture, error) {
	var dirs []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return fs.SkipDir
		}
		if _, err := fs.Stat(fsys, path.Join(p, TaskFile)); err == nil {
			dirs = append(dirs, p)
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, catalog.BadFixture.Wrap(err, "%s: %v", source, err)
	}
	var out []*Fixture
	seen := map[string]string{}
	for _, d := range dirs {
		real := ""
		if realRoot != "" {
			real = filepath.Join(realRoot, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(d, root), "/")))
		}
		f, err := Load(fsys, d, real, source)
		if err != nil {
			return nil, err
		}
		if other, ok := seen[f.Name]; ok {
			return nil, catalog.BadFixture.New("two fixtures are named %s: %s and %s", f.Name, other, d)
		}
		seen[f.Name] = d
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *Fixture) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Load reads the fixture in directory dir of fsys (realDir: its path on
// disk, "" when it has none). Its name is the directory's.
func Load(fsys fs.FS, dir, realDir, source string) (*Fixture, error) {
	name := path.Base(dir)
	if dir == "." && realDir != "" {
		name = filepath.Base(realDir)
	}
	bad := func(format string, args ...any) error {
		return catalog.BadFixture.New("fixture %s (%s): %s", name, source, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(name) {
		return nil, bad("name it with letters, digits, '.', '-' and '_' (at most 64)")
	}
	f := &Fixture{Name: name, Source: source}
	task, err := fs.ReadFile(fsys, path.Join(dir, TaskFile))
	if err != nil {
		return nil, bad("%v", err)
	}
	if f.Task = string(task); strings.TrimSpace(f.Task) == "" {
		return nil, bad("%s is empty", TaskFile)
	}
	cfgBytes, err := fs.ReadFile(fsys, path.Join(dir, ConfigFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, bad("%v", err)
	}
	var c config
	if len(cfgBytes) > 0 {
		md, err := toml.Decode(string(cfgBytes), &c)
		if err != nil {
			return nil, bad("%s: %v", ConfigFile, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return nil, bad("%s: unknown key %s", ConfigFile, und[0])
		}
	}
	if err := f.apply(c, realDir); err != nil {
		return nil, bad("%v", err)
	}
	if f.Script, err = fs.ReadFile(fsys, path.Join(dir, AcceptScript)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, bad("%v", err)
	}
	switch {
	case f.Script != nil && f.Accept == "":
		f.Accept = "sh ./" + AcceptScript
	case f.Script == nil && strings.TrimSpace(f.Accept) == "":
		return nil, bad("no acceptance: add %s, or accept = \"COMMAND\" to %s", AcceptScript, ConfigFile)
	}
	budget := &readBudget{bytes: maxFixtureBytes, files: maxFixtureFiles}
	files, found, err := readTree(fsys, dir, RepoDir, budget)
	if err != nil {
		return nil, bad("%v", err)
	}
	switch {
	case found && f.Repo != "":
		return nil, bad("both %s and repo = %q: keep one", RepoDir, f.Repo)
	case !found && f.Repo == "":
		return nil, bad("no repository: add %s/ (or %s%s), or repo = \"PATH\" to %s", RepoDir, RepoDir, txtarSuffix, ConfigFile)
	}
	f.Files = files
	for _, fl := range files {
		if fl.Path == AcceptScript && f.Script != nil {
			return nil, bad("%s/%s: the fixture's %s is put there; remove one", RepoDir, AcceptScript, AcceptScript)
		}
	}
	if f.Solution, _, err = readTree(fsys, dir, SolutionDir, budget); err != nil {
		return nil, bad("%v", err)
	}
	if del, err := fs.ReadFile(fsys, path.Join(dir, SolutionDelete)); err == nil {
		for line := range strings.SplitSeq(string(del), "\n") {
			if p := strings.TrimSpace(line); p != "" {
				if err := workspace.ValidatePath(p); err != nil {
					return nil, bad("%s: %s: %v", SolutionDelete, p, err)
				}
				f.Delete = append(f.Delete, p)
			}
		}
	}
	f.Digest = f.digest(cfgBytes)
	return f, nil
}

// apply takes fixture.toml's settings.
func (f *Fixture) apply(c config, realDir string) error {
	f.Language, f.Accept, f.Base, f.Attempts = c.Language, c.Accept, c.Base, c.Attempts
	for _, p := range c.Protected {
		if err := workspace.ValidatePath(p); err != nil {
			return fmt.Errorf("protected %q: %v", p, err)
		}
		f.Protected = append(f.Protected, p)
	}
	for p, want := range c.Expect {
		if err := workspace.ValidatePath(p); err != nil {
			return fmt.Errorf("expect %q: %v", p, err)
		}
		if hexPart, ok := strings.CutPrefix(want, "sha256:"); want != Absent && (!ok || len(hexPart) != 64 || !isHex(hexPart)) {
			return fmt.Errorf("expect %q = %q: want \"sha256:<64 hex digits>\" or %q", p, want, Absent)
		}
		if f.Expect == nil {
			f.Expect = map[string]string{}
		}
		f.Expect[p] = strings.ToLower(want)
	}
	for _, d := range []struct {
		s   string
		dst *time.Duration
		key string
	}{{c.Timeout, &f.Timeout, "timeout"}, {c.AcceptTimeout, &f.AcceptTimeout, "accept_timeout"}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil || v < 0 {
			return fmt.Errorf("%s %q: write a duration like 90s or 10m", d.key, d.s)
		}
		*d.dst = v
	}
	if c.Attempts < 0 {
		return fmt.Errorf("attempts %d: want at least 1", c.Attempts)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Checks)) {
		f.Checks = append(f.Checks, run.CheckSpec{Name: name, Command: c.Checks[name]})
	}
	if c.Repo != "" {
		if realDir == "" {
			return fmt.Errorf("repo = %q: a built-in fixture cannot name a repository", c.Repo)
		}
		p := c.Repo
		if !filepath.IsAbs(p) {
			p = filepath.Join(realDir, p)
		}
		f.Repo = filepath.Clean(p)
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// digest hashes the task, the settings, the acceptance and the
// repository's files (not the solution: no run sees it).
func (f *Fixture) digest(cfg []byte) string {
	h := sha256.New()
	part := func(name string, data []byte) {
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	part(TaskFile, []byte(f.Task))
	part(ConfigFile, cfg)
	part(AcceptScript, f.Script)
	for _, fl := range f.Files {
		part(fmt.Sprintf("%s/%s %v", RepoDir, fl.Path, fl.Exec), fl.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// readBudget bounds what a fixture's trees hold in memory.
type readBudget struct {
	bytes int64
	files int
}

func (b *readBudget) take(n int64) error {
	b.bytes -= n
	b.files--
	if b.bytes < 0 || b.files < 0 {
		return fmt.Errorf("more than %d files or %d MiB: name a repository with repo = \"PATH\" instead", maxFixtureFiles, maxFixtureBytes>>20)
	}
	return nil
}

// readTree reads the tree called name in the fixture directory dir: the
// directory name/, or the txtar archive name.txtar. found is false when
// there is neither.
func readTree(fsys fs.FS, dir, name string, b *readBudget) (files []File, found bool, err error) {
	if data, err := fs.ReadFile(fsys, path.Join(dir, name+txtarSuffix)); err == nil {
		if err := b.take(int64(len(data))); err != nil {
			return nil, false, err
		}
		files, err := parseTxtar(data)
		if err != nil {
			return nil, false, fmt.Errorf("%s%s: %v", name, txtarSuffix, err)
		}
		return files, true, nil
	}
	root := path.Join(dir, name)
	if fi, err := fs.Stat(fsys, root); err != nil || !fi.IsDir() {
		return nil, false, nil
	}
	err = fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if err := workspace.ValidatePath(rel); err != nil {
			return fmt.Errorf("%s/%s: %v", name, rel, err)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s/%s: not a regular file", name, rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := b.take(info.Size()); err != nil {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: rel, Data: data, Exec: info.Mode()&0o111 != 0})
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return files, true, nil
}

// parseTxtar reads a txtar archive: a comment, then files, each opened
// by a line "-- NAME --" and holding the lines up to the next one.
func parseTxtar(data []byte) ([]File, error) {
	var files []File
	var cur *File
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		if name, ok := txtarMarker(line); ok {
			if err := workspace.ValidatePath(name); err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			files = append(files, File{Path: name, Data: []byte{}})
			cur = &files[len(files)-1]
			continue
		}
		if cur != nil {
			cur.Data = append(append(cur.Data, line...), '\n')
		}
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Path] {
			return nil, fmt.Errorf("%s is there twice", f.Path)
		}
		seen[f.Path] = true
	}
	if len(files) == 0 {
		return nil, errors.New("no files (each opens with a line \"-- NAME --\")")
	}
	return files, nil
}

func txtarMarker(line []byte) (string, bool) {
	s := string(bytes.TrimSuffix(line, []byte("\r")))
	if !strings.HasPrefix(s, "-- ") || !strings.HasSuffix(s, " --") || len(s) < 7 {
		return "", false
	}
	return strings.TrimSpace(s[3 : len(s)-3]), true
}

// Select keeps the fixtures called names (every one when names is empty),
// in the order of fixtures; a name no fixture has is an error.
func Select(fixtures []*Fixture, names []string) ([]*Fixture, error) {
	if len(fixtures) == 0 {
		return nil, catalog.NoFixtures.New("no directory with a %s was found", TaskFile)
	}
	if len(names) == 0 {
		return fixtures, nil
	}
	var out []*Fixture
	for _, f := range fixtures {
		if slices.Contains(names, f.Name) {
			out = append(out, f)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(out, func(f *Fixture) bool { return f.Name == n }) {
			var have []string
			for _, f := range fixtures {
				have = append(have, f.Name)
			}
			return nil, catalog.NoFixtures.New("no fixture is called %q; there are: %s", n, strings.Join(have, ", "))
		}
	}
	return out, nil
}
