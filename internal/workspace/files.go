package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// FileAt reads the file at path in commit's tree, from the repository's
// objects (no checkout, nothing run in a work tree). ok is false when the
// tree has no file there (a directory or a submodule there is not a file
// either). A symlink reads as its target.
func (r *Repo) FileAt(ctx context.Context, commit, path string) (data []byte, ok bool, err error) {
	return FileAtDir(ctx, r.path, commit, path)
}

// FileAtDir is FileAt for the repository at dir, a work tree or a bare
// repository (a team server's project), which OpenRepo does not open.
// Its answers for a commit the repository holds are remembered in the
// process (see commitMemo): a team server reads the same base's file for
// every submit.
func FileAtDir(ctx context.Context, dir, commit, path string) (data []byte, ok bool, err error) {
	data, ok, _, err = fileAt(ctx, dir, commit, path)
	return data, ok, err
}

// fileAt is FileAtDir; known says the answer is about the commit (the
// repository holds it), so that it holds wherever the commit is.
func fileAt(ctx context.Context, dir, commit, path string) (data []byte, ok, known bool, err error) {
	if !isObjectID(commit) {
		return nil, false, false, fmt.Errorf("read %s: %q is not a full commit id", path, commit)
	}
	if err := ValidatePath(path); err != nil {
		return nil, false, false, fmt.Errorf("read %s: %w", path, err)
	}
	if a, hit := fileMemo.get(commit + ":" + path); hit {
		return bytes.Clone(a.data), a.ok, true, nil // (the caller may change its copy)
	}
	answers, known, err := filesAt(ctx, dir, commit, []string{path})
	if err != nil {
		return nil, false, false, err
	}
	// (an answer too large to remember is not kept elsewhere either)
	return answers[0].data, answers[0].ok, known && len(answers[0].data) <= memoMaxData, nil
}

// PrefetchFiles reads the files at paths in commit's tree of the
// repository at dir, in one git process, for the FileAtDir calls to come
// (the process remembers the answers, see commitMemo): where they would
// each have run one. Paths already remembered, and invalid ones, are left
// out; errors are left to those calls.
func PrefetchFiles(ctx context.Context, dir, commit string, paths ...string) {
	var ask []string
	for _, p := range paths {
		if _, hit := fileMemo.get(commit + ":" + p); !hit && ValidatePath(p) == nil {
			ask = append(ask, p)
		}
	}
	if len(ask) > 0 && isObjectID(commit) {
		_, _, _ = filesAt(ctx, dir, commit, ask)
	}
}

// filesAt reads the files at paths in commit's tree in one git process:
// cat-file --batch answers, for each path and then for the commit itself,
// "<id> <type> <size>" and the content, or "<name> missing". The last
// says whether a missing path is the tree's answer (remembered: known) or
// the repository's lack of the commit.
func filesAt(ctx context.Context, dir, commit string, paths []string) (answers []fileAnswer, known bool, err error) {
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(commit + ":" + p + "\n")
	}
	in.WriteString(commit + "^{commit}\n")
	what := strings.Join(paths, ", ")
	out, err := gitCmd{dir: dir, args: []string{"cat-file", "--batch"}, stdin: strings.NewReader(in.String())}.run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, fmt.Errorf("read %s at %s: %w", what, short(commit), err)
	}
	for range paths {
		typ, body, rest, err := batchRecord(out)
		if err != nil {
			return nil, false, fmt.Errorf("read %s at %s: %w", what, short(commit), err)
		}
		a := fileAnswer{body, typ == "blob"}
		if !a.ok {
			a.data = nil // no such path in that tree (or no such commit), or not a file
		}
		answers, out = append(answers, a), rest
	}
	if ctyp, _, _, err := batchRecord(out); err == nil && ctyp == "commit" {
		known = true
		for i, a := range answers {
			if len(a.data) <= memoMaxData {
				fileMemo.put(commit+":"+paths[i], fileAnswer{bytes.Clone(a.data), a.ok})
			}
		}
	}
	return answers, known, nil
}

// batchRecord reads one record of git cat-file --batch from out: its
// type ("missing" for a name git does not find) and content, and what
// follows it.
func batchRecord(out []byte) (typ string, body, rest []byte, err error) {
	head, after, _ := bytes.Cut(out, []byte("\n"))
	f := strings.Fields(string(head))
	if len(f) == 2 && f[1] == "missing" {
		return "missing", nil, after, nil
	}
	if len(f) != 3 {
		return "", nil, nil, fmt.Errorf("git cat-file answered %q", head)
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size < 0 || size >= len(after) || after[size] != '\n' {
		return "", nil, nil, fmt.Errorf("git cat-file answered %q", head)
	}
	return f[1], after[:size], after[size+1:], nil
}

type fileAnswer struct {
	data []byte
	ok   bool
}

// memoMaxData bounds a file FileAtDir remembers.
const memoMaxData = 64 << 10

var fileMemo commitMemo[fileAnswer]

// commitMemo remembers answers that depend on nothing but a commit's
// content, which is the same in every repository that holds the commit
// (its id is the hash of that content): a file at a path, the size of its
// checkout. A CLI process asks once; a team server asks about the same
// base at every submit. It holds at most memoEntries answers.
type commitMemo[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

const memoEntries = 256

func (c *commitMemo[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *commitMemo[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= memoEntries {
		c.m = map[string]V{}
	}
	c.m[k] = v
}

// CommitDir makes dir, a directory of files that nothing has run in yet
// (written by the caller, from content it trusts), a repository with one
// commit of all of them on branch main, and returns the commit. Author,
// committer and date are fixed, so the same files always make the same
// commit. dir must not be a repository already.
func CommitDir(ctx context.Context, dir, message string) (string, error) {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("commit %s: it is a repository already, or cannot be read: %v", dir, err)
	}
	ident := []string{
		"GIT_AUTHOR_NAME=agentrun", "GIT_AUTHOR_EMAIL=agentrun@localhost", "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=agentrun", "GIT_COMMITTER_EMAIL=agentrun@localhost", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
	}
	steps := [][]string{
		{"-c", "init.defaultBranch=main", "init", "-q", "--template="},
		{"-c", "core.autocrlf=false", "add", "-A", "--", "."},
		{"commit", "-q", "--allow-empty", "--no-verify", "-m", message},
		{"rev-parse", "--verify", "HEAD^{commit}"},
	}
	var out []byte
	for _, args := range steps {
		var err error
		if out, err = (gitCmd{dir: dir, args: args, env: ident}).run(ctx); err != nil {
			return "", fmt.Errorf("commit %s: %w", dir, err)
		}
	}
	commit := strings.TrimSpace(string(out))
	if !isObjectID(commit) {
		return "", fmt.Errorf("commit %s: unexpected commit id %q", dir, commit)
	}
	return commit, nil
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// IsDirAt says whether path is a directory of commit's tree in the
// repository at dir (a work tree or a bare repository): one git process.
func IsDirAt(ctx context.Context, dir, commit, path string) (bool, error) {
	if err := ValidatePath(path); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	out, err := gitCmd{dir: dir, args: []string{"cat-file", "--batch-check"}, stdin: strings.NewReader(commit + ":" + path + "\n")}.run(ctx)
	if err != nil {
		return false, fmt.Errorf("look up %s at %s: %w", path, short(commit), err)
	}
	// "<id> tree <size>", or "<name> missing".
	f := strings.Fields(string(out))
	return len(f) == 3 && f[1] == "tree", nil
}
