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
func FileAtDir(ctx context.Context, dir, commit, path string) (data []byte, ok bool, err error) {
	r := &Repo{path: dir}
	if !isObjectID(commit) {
		return nil, false, fmt.Errorf("read %s: %q is not a full commit id", path, commit)
	}
	if err := ValidatePath(path); err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	// One git process: cat-file --batch answers "<id> <type> <size>",
	// then the content, or "<name> missing".
	spec := commit + ":" + path
	out, err := gitCmd{dir: r.path, args: []string{"cat-file", "--batch"}, stdin: strings.NewReader(spec + "\n")}.run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, fmt.Errorf("read %s at %s: %w", path, short(commit), err)
	}
	head, body, _ := bytes.Cut(out, []byte("\n"))
	f := strings.Fields(string(head))
	if len(f) != 3 || f[2] == "missing" {
		return nil, false, nil // no such path in that tree (or no such commit)
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size > len(body) {
		return nil, false, fmt.Errorf("read %s at %s: git cat-file answered %q", path, short(commit), head)
	}
	if f[1] != "blob" {
		return nil, false, nil
	}
	return body[:size], true, nil
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
