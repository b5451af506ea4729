package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// NewLayerCopy returns the plain checkout Provider for a machine with a
// layer cache: a new workspace is a copy of the base commit's cached
// checkout (the lower layer overlay workspaces share, with its shallow
// .git), the layer made first when the cache lacks it. Where no overlay
// can be mounted (the host backend; a sandbox that cannot mount its
// layers; --workspace copy), a second run on a commit then costs a copy of
// files instead of git's copy of the commit's objects and its checkout:
// for a small repository no git process at all. The copy is the
// workspace's own (no links into the layer); everything after Create (its
// scan, its export, Open) is the plain checkout's.
func NewLayerCopy(c *LayerCache) Provider { return layerCopyProvider{c: c} }

type layerCopyProvider struct{ c *LayerCache }

// Create implements Provider.
func (p layerCopyProvider) Create(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error) {
	return p.make(ctx, repo, commit, dir, stateDir, false)
}

// Fill implements Filler.
func (p layerCopyProvider) Fill(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error) {
	return p.make(ctx, repo, commit, dir, stateDir, true)
}

// make takes the layer's spare when it has one (spares.go), else copies
// the layer; then a spare is made for the next workspace on the commit.
func (p layerCopyProvider) make(ctx context.Context, repo, commit, dir, stateDir string, fill bool) (Workspace, error) {
	format, dir, stateDir, err := checkCreate(commit, dir, stateDir)
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	ready := fill && checkEmptyDir(dir) == nil
	if !fill {
		_, err := os.Lstat(dir)
		ready = errors.Is(err, os.ErrNotExist)
	}
	if ready {
		if ws, ok := p.c.takeSpare(ctx, commit, dir, stateDir, fill); ok {
			p.c.spareAfter(commit, format)
			return ws, nil
		}
	}
	ws, err := makeWorkspace(ctx, repo, commit, dir, stateDir, fill, p.populate)
	if err == nil {
		p.c.spareAfter(commit, format)
	}
	return ws, err
}

// Open implements Provider.
func (p layerCopyProvider) Open(ctx context.Context, dir, stateDir string) (Workspace, error) {
	return checkoutProvider{}.Open(ctx, dir, stateDir)
}

// populate copies commit's layer into dir, under the layer's lock (the
// layer is not collected meanwhile); the workspace takes no ref on it.
func (p layerCopyProvider) populate(ctx context.Context, repo, commit, format, dir string) error {
	_, _, err := p.c.withLayer(ctx, repo, commit, format, func(l layer) error {
		return copyTree(ctx, l.tree(), dir)
	})
	return err
}

// copyTree copies the directory src's content into the existing, empty
// directory dst: directories, regular files and symbolic links (copied as
// links, never followed), with their permission bits. Anything else in
// src (the layer holds nothing else) is an error.
func copyTree(ctx context.Context, src, dst string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := os.Lstat(s)
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			if err := os.Mkdir(d, m.Perm()); err != nil {
				return err
			}
			if err := copyTree(ctx, s, d); err != nil {
				return err
			}
		case m.IsRegular():
			if err := copyFile(s, d, m.Perm()); err != nil {
				return err
			}
		case m&os.ModeSymlink != 0:
			target, err := os.Readlink(s)
			if err == nil {
				err = os.Symlink(target, d)
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("copy %s: not a file, a directory or a symbolic link (%v)", s, m.Type())
		}
	}
	return nil
}

// copyFile copies regular file src to dst, which must not exist (the
// kernel copies the bytes: copy_file_range).
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	if _, err = io.Copy(out, in); err == nil {
		// The mode asked for, whatever the umask took from it.
		err = out.Chmod(perm)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
