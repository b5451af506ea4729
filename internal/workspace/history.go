package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Full history (run.HistoryFull): a workspace's .git holds only the base
// commit's objects and marks it shallow. With full history the agent also
// sees the user's whole object store, read-only: ObjectDirs names the
// repository's object directories (which the sandbox shows read-only at
// the same paths), and ShareHistory lists them as the workspace's
// alternates and lifts the shallow mark, so that git log and git blame
// inside walk the history. Nothing is copied, and no git runs in the
// workspace; the user's repository is never written (the sandbox makes
// the directories read-only).

// ObjectDirs returns the object directories of the repository repo: its
// own (the common one, for a linked worktree) and those its
// objects/info/alternates names (one level), absolute and existing.
func ObjectDirs(ctx context.Context, repo string) ([]string, error) {
	common, err := git(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("the repository's object directory: %w", err)
	}
	own := filepath.Join(common, "objects")
	dirs := []string{own}
	b, err := os.ReadFile(filepath.Join(own, "info", "alternates"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, `"`) {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(own, line)
		}
		dirs = append(dirs, filepath.Clean(line))
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the repository at %s has no object directory", repo)
	}
	return out, nil
}

// ShareHistory makes the new workspace ws see the object directories
// dirs as alternates and lifts its shallow mark (an empty shallow file
// marks no commit), before anything has run in it. An overlay's are
// written into its upper layer: the lower layer is shared and never
// written. dirs must be absolute; nothing is read from them.
func ShareHistory(ws Workspace, dirs []string) error {
	var b strings.Builder
	for _, d := range dirs {
		if !filepath.IsAbs(d) || strings.ContainsAny(d, "\n\r\"") {
			return fmt.Errorf("share history: %q is not an absolute path", d)
		}
		b.WriteString(d + "\n")
	}
	root, err := unix.Open(ws.Dir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("share history: %w", err)
	}
	defer unix.Close(root)
	for name, content := range map[string]string{".git/objects/info/alternates": b.String(), ".git/shallow": ""} {
		if err := replaceAt(root, name, content); err != nil {
			return fmt.Errorf("share history: %s: %w", name, err)
		}
	}
	return nil
}

// replaceAt writes content as the file p under root (its directories
// made, nothing followed), in place of what is there.
func replaceAt(root int, p, content string) error {
	dir, name, err := openParent(root, p, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
