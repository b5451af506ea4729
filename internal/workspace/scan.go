package workspace

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
)

// Limit defaults.
const (
	DefaultMaxFiles = 10000
	DefaultMaxBytes = 100 << 20
	// maxDepth caps directory nesting; deeper directories are refused.
	maxDepth = 512
)

// withDefaults fills zero limits.
func (l Limits) withDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFile <= 0 || l.MaxFile > l.MaxBytes {
		l.MaxFile = l.MaxBytes
	}
	return l
}

// Refusal reasons of the scan (paths and symlinks: validate.go).
const (
	reasonSpecial    = "not a regular file, directory or symlink"
	reasonHardLink   = "hard link (more than one name for the file)"
	reasonTooLarge   = "file larger than the per-file limit"
	reasonDeep       = "directory nesting too deep"
	reasonUnreadable = "cannot be read safely"
	reasonSubmodule  = "inside a submodule (submodule contents are not exported)"
)

// scanner walks one workspace.
type scanner struct {
	ctx     context.Context
	m       *manifest // the plain scan's (nil for an upper layer's)
	base    baseIndex
	lim     Limits
	seen    []bool       // by entry id, for a full manifest
	seenAt  map[int]bool // by entry id, for a mapped one
	newHash func() hash.Hash

	ignoreBudget int // patterns still allowed
	maxVisited   int // entries the walk may look at
	// noStat: the tree's stat data says nothing about the manifest's (an
	// overlay's upper layer holds copies): every file found is read.
	noStat bool

	changes  []Change
	refused  []run.Refusal
	refusedP map[string]bool // refused paths: the base keeps them
	bytes    int64
	visited  int
	buf      []byte
}

// scan lists what changed in dir since the manifest m was recorded. It never
// follows a symlink and never opens anything but directories (O_DIRECTORY)
// and regular files (O_NOFOLLOW|O_NONBLOCK, checked with fstat on the fd).
func scan(ctx context.Context, dir string, m *manifest, lim Limits) (*ChangeSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := newScanner(ctx, m, lim)
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(root) }()
	var stack ignoreStack
	if l := s.readExclude(root); l != nil {
		stack = append(stack, l)
	}
	if err := s.walk(root, "", 0, stack, false); err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	for i := range m.entries {
		e := &m.entries[i]
		if s.seen[i] || e.mode == modeGitlink || s.keptByRefusal(e.path) {
			continue
		}
		if err := s.addChange(Change{Path: e.path, Kind: "delete", Mode: e.mode}); err != nil {
			return nil, fmt.Errorf("scan %s: %w", dir, err)
		}
	}
	sort.Slice(s.changes, func(i, j int) bool { return s.changes[i].Path < s.changes[j].Path })
	sort.Slice(s.refused, func(i, j int) bool { return s.refused[i].Path < s.refused[j].Path })
	return &ChangeSet{Changes: s.changes, Refused: s.refused}, nil
}

// newScanner is a scan of a tree made from m, with limits lim.
func newScanner(ctx context.Context, m *manifest, lim Limits) *scanner {
	s := newBaseScanner(ctx, fullIndex{m, m.index()}, m.format, len(m.entries), lim)
	s.m, s.seen, s.seenAt = m, make([]bool, len(m.entries)), nil
	return s
}

// newBaseScanner is a scan against the base b (of count entries, in the
// object format), with limits lim.
func newBaseScanner(ctx context.Context, b baseIndex, format string, count int, lim Limits) *scanner {
	s := &scanner{
		ctx:      ctx,
		base:     b,
		lim:      lim.withDefaults(),
		seenAt:   map[int]bool{},
		refusedP: map[string]bool{},
		newHash:  objectHash(format),

		ignoreBudget: maxIgnorePatterns,
	}
	s.maxVisited = count + 10*s.lim.MaxFiles + 100000
	return s
}

// baseIndex is what a scan looks up in the manifest of its base: the
// entries, by an id (an index in a full manifest, a record's offset in a
// mapped one).
type baseIndex interface {
	find(p string) (id int, ok bool) // the entry at path p
	at(id int) *entry
	trackedDir(p string) bool                      // p is a directory holding tracked entries
	below(dir string, fn func(id int) error) error // the entries under dir, in path order
}

// fullIndex is the baseIndex of a parsed manifest.
type fullIndex struct {
	m   *manifest
	idx *manifestIndex
}

func (f fullIndex) find(p string) (int, bool) { i, ok := f.idx.byPath[p]; return i, ok }
func (f fullIndex) at(i int) *entry           { return &f.m.entries[i] }
func (f fullIndex) trackedDir(p string) bool  { return f.idx.trackedDirs[p] }

func (f fullIndex) below(dir string, fn func(int) error) error {
	entries, d := f.m.entries, dir+"/"
	for i := sort.Search(len(entries), func(i int) bool { return entries[i].path >= d }); i < len(entries) && strings.HasPrefix(entries[i].path, d); i++ {
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) markSeen(id int) {
	if s.seen != nil {
		s.seen[id] = true
	} else {
		s.seenAt[id] = true
	}
}

func (s *scanner) isSeen(id int) bool {
	if s.seen != nil {
		return s.seen[id]
	}
	return s.seenAt[id]
}

// manifestIndex is what a scan looks up in a manifest; a manifest makes
// it once and every scan shares it, read-only.
type manifestIndex struct {
	byPath      map[string]int  // entry index by path
	trackedDirs map[string]bool // directories holding tracked entries
}

// index returns m's index, made on first use.
func (m *manifest) index() *manifestIndex {
	m.once.Do(func() {
		// Sorted by path (git's index order), so that the entries under
		// a directory are one run of them.
		sortEntries(m.entries)
		idx := &manifestIndex{byPath: make(map[string]int, len(m.entries)), trackedDirs: map[string]bool{}}
		for i := range m.entries {
			p := m.entries[i].path
			idx.byPath[p] = i
			for j := strings.LastIndexByte(p, '/'); j > 0; j = strings.LastIndexByte(p[:j], '/') {
				if idx.trackedDirs[p[:j]] {
					break
				}
				idx.trackedDirs[p[:j]] = true
			}
		}
		m.idx = idx
	})
	return m.idx
}

// keptByRefusal reports a base path that is, or is under, a refused path.
func (s *scanner) keptByRefusal(p string) bool {
	if len(s.refusedP) == 0 {
		return false
	}
	for {
		if s.refusedP[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

func (s *scanner) refuse(p, reason string) error {
	s.refusedP[p] = true
	s.refused = append(s.refused, run.Refusal{Path: displayPath(p), Reason: reason})
	if len(s.refused) > s.lim.MaxFiles {
		return fmt.Errorf("more than %d refused entries: %w", s.lim.MaxFiles, ErrTooLarge)
	}
	return nil
}

func (s *scanner) addChange(c Change) error {
	s.changes = append(s.changes, c)
	s.bytes += int64(len(c.Content))
	if len(s.changes) > s.lim.MaxFiles {
		return fmt.Errorf("more than %d changed files: %w", s.lim.MaxFiles, ErrTooLarge)
	}
	if s.bytes > s.lim.MaxBytes {
		return fmt.Errorf("more than %d bytes of changes: %w", s.lim.MaxBytes, ErrTooLarge)
	}
	return nil
}

// displayPath makes a refused path printable.
func displayPath(p string) string {
	if !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(p)
	}
	return p
}

// walk scans the directory open at fd, whose path is prefix (with a
// trailing slash, or empty at the root). stack is the ignore rules in force
// above it; inIgnored says the directory itself is ignored (it was entered
// only for its tracked entries).
func (s *scanner) walk(fd int, prefix string, depth int, stack ignoreStack, inIgnored bool) error {
	names, err := readNames(fd, s.maxVisited-s.visited)
	if err != nil {
		return fmt.Errorf("read directory %q: %w", prefix, err)
	}
	if !inIgnored && slices.Contains(names, ".gitignore") {
		if l := s.readIgnore(fd, prefix); l != nil {
			stack = append(stack[:len(stack):len(stack)], l)
		}
	}
	for _, name := range names {
		if prefix == "" && name == ".git" {
			continue // the workspace's own repository
		}
		s.visited++
		if s.visited > s.maxVisited {
			return fmt.Errorf("more than %d entries in the workspace: %w", s.maxVisited, ErrTooLarge)
		}
		if s.visited%256 == 0 && s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		p := prefix + name
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed while we looked
			}
			if err := s.refuse(p, reasonUnreadable); err != nil {
				return err
			}
			continue
		}
		kind := uint32(st.Mode) & unix.S_IFMT
		_, tracked := s.base.find(p)
		if kind == unix.S_IFDIR {
			tracked = tracked || s.base.trackedDir(p)
		}
		// A tracked file is never ignored; a tracked directory is entered,
		// but its untracked entries follow its ignore state.
		ignored := inIgnored || ((!tracked || kind == unix.S_IFDIR) && stack.ignored(p, kind == unix.S_IFDIR))
		if ignored && !tracked {
			continue // an untracked, ignored entry: not a change
		}
		switch kind {
		case unix.S_IFDIR:
			err = s.dir(fd, name, p, depth, stack, ignored)
		case unix.S_IFREG:
			err = s.file(fd, name, p, &st)
		case unix.S_IFLNK:
			err = s.symlink(fd, name, p, &st)
		default:
			err = s.refuse(p, reasonSpecial)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) dir(fd int, name, p string, depth int, stack ignoreStack, ignored bool) error {
	if i, ok := s.base.find(p); ok && s.base.at(i).mode == modeGitlink {
		s.markSeen(i)
		return s.submodule(fd, name, p)
	}
	if err := ValidatePath(p); err != nil {
		return s.refuse(p, err.Error())
	}
	if depth+1 >= maxDepth {
		return s.refuse(p, reasonDeep)
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return s.refuse(p, reasonUnreadable)
	}
	defer func() { _ = unix.Close(sub) }()
	return s.walk(sub, p+"/", depth+1, stack, ignored)
}

// readIgnore reads the .gitignore of the directory open at fd, if it is a
// regular file (a symlinked one is not read, as git does), within the
// scan's pattern budget.
func (s *scanner) readIgnore(fd int, prefix string) *ignoreList {
	if s.ignoreBudget <= 0 {
		return nil
	}
	data, _, reason := readFileAt(fd, ".gitignore", maxIgnoreFile)
	if reason != "" || len(data) == 0 {
		return nil
	}
	l := parseIgnore(prefix, data, s.ignoreBudget)
	s.ignoreBudget -= len(l.patterns)
	return l
}

// readExclude reads .git/info/exclude of the workspace, component by
// component without following symlinks.
func (s *scanner) readExclude(root int) *ignoreList {
	fd := root
	for _, d := range []string{".git", "info"} {
		next, err := unix.Openat(fd, d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if fd != root {
			_ = unix.Close(fd)
		}
		if err != nil {
			return nil
		}
		fd = next
	}
	defer func() { _ = unix.Close(fd) }()
	data, _, reason := readFileAt(fd, "exclude", maxIgnoreFile)
	if reason != "" || len(data) == 0 {
		return nil
	}
	l := parseIgnore("", data, s.ignoreBudget)
	s.ignoreBudget -= len(l.patterns)
	return l
}

// submodule refuses anything the agent put in a submodule's directory.
func (s *scanner) submodule(fd int, name, p string) error {
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer func() { _ = unix.Close(sub) }()
	names, err := readNames(sub, 1)
	if err == nil && len(names) > 0 {
		return s.refuse(p, reasonSubmodule)
	}
	return nil
}

// unchanged reports stat data equal to the manifest entry's, outside the
// racy window.
func (s *scanner) unchanged(e *entry, st *unix.Stat_t, mode uint32) bool {
	if s.noStat {
		return false
	}
	var cur entry
	fillStat(&cur, st)
	return e.mode == mode && cur.size == e.size && cur.mtime == e.mtime && cur.ctime == e.ctime &&
		cur.ino == e.ino && !s.m.racy(e)
}

// lookup returns the manifest entry at p that a non-directory can match.
func (s *scanner) lookup(p string) (*entry, int) {
	i, ok := s.base.find(p)
	if !ok {
		return nil, -1
	}
	return s.base.at(i), i
}

func gitFileMode(st *unix.Stat_t) uint32 {
	if uint32(st.Mode)&unix.S_IXUSR != 0 {
		return modeExec
	}
	return modeFile
}

func (s *scanner) file(fd int, name, p string, st *unix.Stat_t) error {
	e, i := s.lookup(p)
	if e != nil {
		s.markSeen(i)
		if e.mode == modeGitlink {
			return s.refuse(p, reasonSubmodule)
		}
		if s.unchanged(e, st, gitFileMode(st)) {
			return nil
		}
	} else if err := ValidatePath(p); err != nil {
		return s.refuse(p, err.Error()) // a new path is checked before anything is read
	}
	if st.Nlink > 1 {
		return s.refuse(p, reasonHardLink)
	}
	if st.Size > s.lim.MaxFile {
		return s.refuse(p, reasonTooLarge)
	}
	content, mode, reason := readFileAt(fd, name, s.lim.MaxFile)
	if reason != "" {
		return s.refuse(p, reason)
	}
	return s.record(e, p, mode, content)
}

// readFileAt opens name under dirfd without following a symlink and
// without blocking, checks on the open fd that it is a regular file with
// one link and at most limit bytes, and reads it. reason is set when it
// refuses.
func readFileAt(dirfd int, name string, limit int64) (content []byte, mode uint32, reason string) {
	// Look before opening: opening a device node can act on the device.
	var pre unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &pre, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, 0, reasonUnreadable
	}
	if uint32(pre.Mode)&unix.S_IFMT != unix.S_IFREG {
		return nil, 0, reasonSpecial
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, 0, reasonUnreadable
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, reasonUnreadable
	}
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG:
		return nil, 0, reasonSpecial
	case st.Nlink > 1:
		return nil, 0, reasonHardLink
	case st.Size > limit:
		return nil, 0, reasonTooLarge
	}
	// Read to EOF but never past the limit: the file may grow.
	content = make([]byte, 0, st.Size)
	for {
		if int64(len(content)) > limit {
			return nil, 0, reasonTooLarge
		}
		if len(content) == cap(content) {
			content = append(content, 0)[:len(content)]
		}
		n, err := unix.Read(fd, content[len(content):cap(content)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, 0, reasonUnreadable
		}
		if n == 0 {
			break
		}
		content = content[:len(content)+n]
	}
	if int64(len(content)) > limit {
		return nil, 0, reasonTooLarge
	}
	return content, gitFileMode(&st), ""
}

func (s *scanner) symlink(fd int, name, p string, st *unix.Stat_t) error {
	e, i := s.lookup(p)
	if e != nil {
		s.markSeen(i)
		if e.mode == modeGitlink {
			return s.refuse(p, reasonSubmodule)
		}
		if s.unchanged(e, st, modeSymlink) {
			return nil
		}
	} else if err := ValidatePath(p); err != nil {
		return s.refuse(p, err.Error())
	}
	if len(s.buf) < maxPathLen+1 {
		s.buf = make([]byte, maxPathLen+1)
	}
	n, err := unix.Readlinkat(fd, name, s.buf)
	if err != nil {
		return s.refuse(p, reasonUnreadable)
	}
	if n > maxPathLen {
		return s.refuse(p, errLinkLong.Error())
	}
	target := s.buf[:n]
	if s.same(e, modeSymlink, target) {
		return nil // the base's own link, as it was
	}
	if err := ValidateSymlink(p, string(target)); err != nil {
		return s.refuse(p, err.Error())
	}
	return s.record(e, p, modeSymlink, []byte(string(target)))
}

// same reports content and mode equal to the manifest entry's.
func (s *scanner) same(e *entry, mode uint32, content []byte) bool {
	return e != nil && e.mode == mode && objectID(s.newHash, "blob", content) == e.blob
}

// record adds an add or modify change unless the content and mode equal
// the manifest entry's. A changed tracked path is validated here (a new
// one was validated before it was read).
func (s *scanner) record(e *entry, p string, mode uint32, content []byte) error {
	if s.same(e, mode, content) {
		return nil
	}
	kind := "add"
	if e != nil {
		kind = "modify"
		if err := ValidatePath(p); err != nil {
			return s.refuse(p, err.Error())
		}
	}
	if content == nil {
		content = []byte{}
	}
	return s.addChange(Change{Path: p, Kind: kind, Mode: mode, Content: content})
}

// readNames lists the directory open at fd (without "." and ".."); past
// limit names it returns ErrTooLarge (limit 1: it stops at the first name).
func readNames(fd int, limit int) ([]string, error) {
	buf := make([]byte, 32<<10)
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		if limit == 1 && len(names) > 0 {
			return names, nil
		}
		if len(names) > limit {
			return nil, fmt.Errorf("more than %d entries in one directory: %w", limit, ErrTooLarge)
		}
	}
}
