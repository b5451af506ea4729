package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// ApplySetup copies the setup layer l into dir, a plain workspace made
// from the layer's commit (the copy fallback, where no overlay stacks
// it): a layer in Mode overlay is read by the kernel's rules (a whiteout
// removes its path, an opaque directory replaces the workspace's), one in
// Mode copy makes dir hold exactly its tree. Everything is written
// through an os.Root on dir: a symlink from the layer never leads a write
// out of the workspace. Special files other than whiteouts are skipped.
func ApplySetup(ctx context.Context, l SetupLayer, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("apply setup layer: %w", err)
	}
	defer root.Close()
	a := &applier{ctx: ctx, root: root, src: l.Tree(), upper: l.Info.Mode == SetupOverlay}
	if err := filepath.WalkDir(a.src, a.entry); err != nil {
		return fmt.Errorf("apply setup layer %s: %w", l.Key, err)
	}
	if !a.upper {
		if err := a.prune(dir); err != nil {
			return fmt.Errorf("apply setup layer %s: %w", l.Key, err)
		}
	}
	return nil
}

type applier struct {
	ctx   context.Context
	root  *os.Root
	src   string
	upper bool // the tree is an overlay's upper layer
}

func (a *applier) entry(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	if err := a.ctx.Err(); err != nil {
		return err
	}
	rel, err := filepath.Rel(a.src, p)
	if err != nil || rel == "." {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	mode := os.FileMode(st.Mode & 0o7777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if a.upper && overlay.IsWhiteout(&st) {
			return a.root.RemoveAll(rel)
		}
		return nil
	case unix.S_IFDIR:
		return a.dir(p, rel, mode)
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if cur, err := a.root.Readlink(rel); err == nil && cur == target {
			return nil
		}
		if err := a.root.RemoveAll(rel); err != nil {
			return err
		}
		return a.root.Symlink(target, rel)
	case unix.S_IFREG:
		return a.file(p, rel, mode, st.Size)
	}
	return nil // other special files: not part of a workspace
}

// dir makes the directory rel (emptied first when the layer's is opaque).
func (a *applier) dir(p, rel string, mode os.FileMode) error {
	replace := false
	if a.upper {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		replace, _ = overlay.IsOpaque(fd)
		_ = unix.Close(fd)
	}
	if fi, err := a.root.Lstat(rel); err == nil && (replace || !fi.IsDir()) {
		if err := a.root.RemoveAll(rel); err != nil {
			return err
		}
	}
	if err := a.root.Mkdir(rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return a.root.Chmod(rel, mode|0o700)
}

// file copies the regular file p to rel, unless rel holds the same bytes.
func (a *applier) file(p, rel string, mode os.FileMode, size int64) error {
	if fi, err := a.root.Lstat(rel); err == nil {
		if fi.Mode().IsRegular() && fi.Size() == size && a.same(p, rel) {
			return a.root.Chmod(rel, mode)
		}
		if err := a.root.RemoveAll(rel); err != nil {
			return err
		}
	}
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := a.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return a.root.Chmod(rel, mode)
}

// same reports rel holding what p holds.
func (a *applier) same(p, rel string) bool {
	want, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	got, err := a.root.ReadFile(rel)
	return err == nil && bytes.Equal(want, got)
}

// prune removes what dir holds that the layer's whole tree does not.
func (a *applier) prune(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if _, err := os.Lstat(filepath.Join(a.src, rel)); errors.Is(err, fs.ErrNotExist) {
			if err := a.root.RemoveAll(rel); err != nil {
				return err
			}
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
}
