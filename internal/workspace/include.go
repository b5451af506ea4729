package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/run"
)

// Included files: git-ignored files of the user's working tree (a .env, a
// config/local.yml) that a run asks to have in its workspace. They are
// named by gitignore-style patterns, in IncludeListName at the top of the
// working tree or given with the request, and resolved by ResolveInclude
// at submit: only paths git ignores qualify, so that what is copied in is
// never something the export could take for the agent's work. They are
// copied into a new workspace by Include (into an overlay's upper layer,
// never its shared lower layer), and DropIncluded takes them out of every
// change set, so they never reach the branch.

// IncludeListName is the list of patterns at the top of the working tree.
const IncludeListName = ".worktreeinclude"

// Bounds of what is included: files, bytes altogether, and the list.
const (
	MaxIncludeFiles = 1000
	MaxIncludeBytes = 64 << 20
	maxIncludeList  = 64 << 10
)

// Git modes of included files (run.IncludedFile.Mode).
const (
	includeFile       = "100644"
	includeExecutable = "100755"
	includeSymlink    = "120000"
)

// IncludeError is a path that cannot be included, and why.
type IncludeError struct{ Path, Why string }

func (e *IncludeError) Error() string { return e.Path + ": " + e.Why }

// ErrIncludeTooLarge: the included files pass MaxIncludeFiles or
// MaxIncludeBytes.
var ErrIncludeTooLarge = errors.New("the included files are too large")

// ReadIncludeList reads the patterns of IncludeListName at the top of
// the working tree repo (found false when there is none). Blank lines and
// comments are left out.
func ReadIncludeList(repo string) (patterns []string, found bool, err error) {
	root, err := unix.Open(repo, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", repo, err)
	}
	defer unix.Close(root)
	var st unix.Stat_t
	if err := unix.Fstatat(root, IncludeListName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%s: %w", IncludeListName, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, true, &IncludeError{Path: IncludeListName, Why: "not a regular file"}
	}
	b, _, why := readIncluded(root, IncludeListName, maxIncludeList)
	if why != "" {
		return nil, true, &IncludeError{Path: IncludeListName, Why: why}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		patterns = append(patterns, line)
	}
	return patterns, true, nil
}

// ResolveInclude lists the files of repo's working tree that patterns
// (gitignore-style, relative to the top) match, each checked and hashed:
// a match git does not ignore (tracked, or untracked and not ignored) is
// an IncludeError naming it, and so is one that is not a regular file or
// a symlink whose target stays in the repository. Past MaxIncludeFiles or
// MaxIncludeBytes the error is ErrIncludeTooLarge. It runs git in repo
// only (never in a workspace) and reads with symlink-safe calls.
func ResolveInclude(ctx context.Context, repo string, patterns []string) ([]run.IncludedFile, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	list, err := os.CreateTemp("", "agentrun-include-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(list.Name())
	_, err = list.WriteString(strings.Join(patterns, "\n") + "\n")
	if cerr := list.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	matched := func(which string) ([]string, error) {
		out, err := gitCmd{dir: repo, args: []string{"ls-files", "-z", which, "--ignored", "--exclude-from=" + list.Name()}}.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("match the included files: %w", err)
		}
		return splitZ(out), nil
	}
	tracked, err := matched("--cached")
	if err != nil {
		return nil, err
	}
	if len(tracked) > 0 {
		return nil, &IncludeError{Path: tracked[0], Why: "tracked by git (it is in the workspace already; only git-ignored files are included)"}
	}
	paths, err := matched("--others")
	if err != nil {
		return nil, err
	}
	if len(paths) > MaxIncludeFiles {
		return nil, fmt.Errorf("%w: %d files match, more than %d", ErrIncludeTooLarge, len(paths), MaxIncludeFiles)
	}
	if err := checkIgnored(ctx, repo, paths); err != nil {
		return nil, err
	}
	return hashIncluded(repo, paths)
}

// checkIgnored fails with an IncludeError for the first of paths that git
// (the repository's .gitignore files, its info/exclude, the user's
// excludes file) does not ignore: the export would take it for the
// agent's.
func checkIgnored(ctx context.Context, repo string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	out, err := gitCmd{dir: repo, args: []string{"check-ignore", "-z", "--stdin"}, stdin: &in}.run(ctx)
	if err != nil && exitCode(err) != 1 { // 1: none is ignored
		return fmt.Errorf("check the included files: %w", err)
	}
	ignored := splitZ(out)
	slices.Sort(ignored)
	for _, p := range paths {
		if _, ok := slices.BinarySearch(ignored, p); !ok {
			return &IncludeError{Path: p, Why: "not ignored by git (an untracked file that is not ignored would be exported as the agent's; add it to .gitignore, or drop the pattern)"}
		}
	}
	return nil
}

// hashIncluded reads each of paths (sorted) under repo and records it.
func hashIncluded(repo string, paths []string) ([]run.IncludedFile, error) {
	slices.Sort(paths)
	root, err := unix.Open(repo, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", repo, err)
	}
	defer unix.Close(root)
	var out []run.IncludedFile
	var total int64
	for _, p := range paths {
		content, mode, err := readIncludedPath(root, p, MaxIncludeBytes-total)
		if err != nil {
			return nil, err
		}
		total += int64(len(content))
		sum := sha256.Sum256(content)
		out = append(out, run.IncludedFile{Path: p, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Mode: mode})
	}
	return out, nil
}

// readIncludedPath reads the included path p under root: a regular
// file's content, or a symlink's target (which must be relative and stay
// in the repository, out of .git), with its git mode. Past limit bytes
// the error is ErrIncludeTooLarge.
func readIncludedPath(root int, p string, limit int64) (content []byte, mode string, err error) {
	if err := ValidatePath(p); err != nil {
		return nil, "", &IncludeError{Path: p, Why: err.Error()}
	}
	dir, name, err := openParent(root, p, false)
	if err != nil {
		return nil, "", &IncludeError{Path: p, Why: err.Error()}
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, "", &IncludeError{Path: p, Why: err.Error()}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := readlinkAt(dir, name)
		if err != nil {
			return nil, "", &IncludeError{Path: p, Why: err.Error()}
		}
		if why := linkStaysIn(p, target); why != "" {
			return nil, "", &IncludeError{Path: p, Why: why}
		}
		return []byte(target), includeSymlink, nil
	case unix.S_IFREG:
	default:
		return nil, "", &IncludeError{Path: p, Why: "not a regular file (only files and symlinks within the repository are included)"}
	}
	content, exec, why := readIncluded(dir, name, limit)
	switch {
	case why == reasonTooLarge:
		return nil, "", fmt.Errorf("%w: more than %d bytes altogether (at %s)", ErrIncludeTooLarge, MaxIncludeBytes, p)
	case why != "":
		return nil, "", &IncludeError{Path: p, Why: why}
	case exec:
		return content, includeExecutable, nil
	}
	return content, includeFile, nil
}

// linkStaysIn says why the symlink at p with target may not be included
// ("" when it may): its target must be relative and resolve, from p's
// directory, inside the repository and outside .git.
func linkStaysIn(p, target string) string {
	if target == "" || path.IsAbs(target) {
		return "a symlink to an absolute path (it would leave the repository)"
	}
	resolved := path.Join(path.Dir(p), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return "a symlink that leaves the repository"
	}
	if resolved != "." {
		for comp := range strings.SplitSeq(resolved, "/") {
			if isDotGit(comp) {
				return "a symlink into .git"
			}
		}
	}
	return ""
}

// readIncluded reads the regular file name under dir without following
// a symlink or blocking, at most limit bytes (reasonTooLarge past it).
func readIncluded(dir int, name string, limit int64) (content []byte, executable bool, why string) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, false, err.Error()
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err.Error()
	}
	if !fi.Mode().IsRegular() {
		return nil, false, "not a regular file"
	}
	if fi.Size() > limit {
		return nil, false, reasonTooLarge
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(&limitedReader{f: f, left: limit + 1}); err != nil {
		return nil, false, err.Error()
	}
	if int64(b.Len()) > limit {
		return nil, false, reasonTooLarge
	}
	return b.Bytes(), fi.Mode()&0o111 != 0, ""
}

// limitedReader reads at most left bytes of f.
type limitedReader struct {
	f    *os.File
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.f.Read(p)
	l.left -= int64(n)
	return n, err
}

// openParent opens the directory of the slash path p under root, one
// component at a time without following symlinks, and returns it with
// p's last component. With mkdir, missing directories are made (0755).
func openParent(root int, p string, mkdir bool) (dir int, name string, err error) {
	comps := strings.Split(p, "/")
	dir, err = unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	for _, c := range comps[:len(comps)-1] {
		next, err := unix.Openat(dir, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdir {
			if err = unix.Mkdirat(dir, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(dir, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(dir)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return -1, "", fmt.Errorf("%s is not a directory", c)
			}
			return -1, "", err
		}
		dir = next
	}
	return dir, comps[len(comps)-1], nil
}

// readlinkAt reads the target of the symlink name under dir.
func readlinkAt(dir int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", errors.New("symlink target too long")
	}
	return string(buf[:n]), nil
}

func splitZ(b []byte) []string {
	var out []string
	for s := range bytes.SplitSeq(b, []byte{0}) {
		if len(s) > 0 {
			out = append(out, string(s))
		}
	}
	return out
}
