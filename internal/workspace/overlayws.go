package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// NewOverlay returns the copy-on-write Provider. A workspace is three
// directories: the lower layer, the checkout of the base commit from
// cache (made there once per commit, as NewCheckout makes a workspace,
// and shared read-only by every workspace on it); dir, the upper layer,
// which starts empty and receives what the agent changes; and the
// kernel's work directory in the state directory. Making a workspace on
// a cached commit costs the same for 10 files or 100,000.
//
// The tree the agent works in exists only where the layers are mounted
// (overlay.Mount; see Layered): the sandbox mounts them in its own mount
// namespace, so nothing is mounted on the host, and on the host dir shows
// only what the agent changed (with the kernel's whiteouts for what it
// deleted). Scan reads dir alone (scan_overlay.go): its cost grows with
// the changes, not with the repository.
//
// Errors: ErrNotOverlay from Open when the state directory holds no
// overlay workspace (it may hold a plain checkout).
func NewOverlay(cache *LayerCache) Provider { return &overlayProvider{cache: cache} }

// ErrNotOverlay: the state directory holds no overlay workspace.
var ErrNotOverlay = errors.New("not an overlay workspace")

// Layered is the Workspace of an overlay: its Dir is the upper layer, and
// the tree the agent works in is the overlay of Layers, mounted by
// whoever runs the agent (overlay.Mount). Nothing may write to the layers
// but through such a mount.
type Layered interface {
	Workspace
	// Layers are the overlay's directories: Lower the shared read-only
	// checkout of the base commit, Upper (Dir) the changes, Work the
	// kernel's.
	Layers() overlay.Layers
	// LayerMade reports that making this workspace made its lower layer
	// (the first workspace on its commit); false: the layer was cached.
	LayerMade() bool
}

type overlayProvider struct {
	cache *LayerCache
}

// pointerName is the overlay workspace's record in its state directory:
// a symlink whose target is the key of its layer. Made last, it marks
// the workspace complete. A short symlink's target is kept in its inode,
// so the record is metadata only: it is on disk once any later fsync on
// the file system is (the run record's, before the agent starts), which
// costs Create no fsync of its own.
const pointerName = "workspace-overlay"

// repoName holds the repository the workspace was made from, for making
// its layer again should the cache lose it (best effort: not synced).
const repoName = "workspace-overlay-repo"

// workName is the kernel's work directory, in the state directory (on the
// same file system as the upper layer, as the kernel requires).
const workName = "overlay-work"

// pointer is what the pointer and the repo file say.
type pointer struct {
	Layer  string // the layer's key
	Commit string
	Format string
	Repo   string // "" when not known
}

func readPointer(stateDir string) (*pointer, error) {
	key, err := os.Readlink(filepath.Join(stateDir, pointerName))
	if err != nil {
		return nil, err
	}
	commit, ok := strings.CutPrefix(key, layerVersion+"-")
	if !ok || !isObjectID(commit) {
		return nil, fmt.Errorf("damaged %s in %s", pointerName, stateDir)
	}
	p := &pointer{Layer: key, Commit: commit, Format: "sha1"}
	if len(commit) == 64 {
		p.Format = "sha256"
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, repoName)); err == nil {
		p.Repo = strings.TrimSuffix(string(b), "\n")
	}
	return p, nil
}

// Create implements Provider.
func (o *overlayProvider) Create(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error) {
	format, dir, stateDir, err := checkCreate(commit, dir, stateDir)
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	ws, err := o.create(ctx, repo, commit, format, dir, stateDir)
	if err != nil {
		_ = os.RemoveAll(dir)
		for _, n := range []string{pointerName, repoName, workName} {
			_ = os.RemoveAll(filepath.Join(stateDir, n))
		}
		return nil, fmt.Errorf("create workspace %s: %w", dir, err)
	}
	return ws, nil
}

func (o *overlayProvider) create(ctx context.Context, repo, commit, format, dir, stateDir string) (*overlayWorkspace, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	work := filepath.Join(stateDir, workName)
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(stateDir, repoName), []byte(repo+"\n"), 0o644)
	l, made, err := o.cache.acquire(ctx, repo, commit, format, stateDir, func(l layer) error {
		return os.Symlink(l.key, filepath.Join(stateDir, pointerName))
	})
	if err != nil {
		return nil, err
	}
	return &overlayWorkspace{dir: dir, stateDir: stateDir, layer: l, made: made}, nil
}

// Open implements Provider. A lower layer that is gone from the cache
// (removed by hand) is made again from the repository: the same commit
// gives the same tree, under the same changes.
func (o *overlayProvider) Open(ctx context.Context, dir, stateDir string) (Workspace, error) {
	ptr, err := readPointer(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open workspace %s: %w", dir, ErrNotOverlay)
	}
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open workspace: %s is not a directory", dir)
	}
	l := o.cache.layer(ptr.Layer)
	if _, err := os.Lstat(filepath.Join(l.dir, layerInfoName)); err != nil {
		if ptr.Repo == "" {
			return nil, fmt.Errorf("open workspace %s: its layer %s is gone, and the repository to make it again is not known", dir, l.dir)
		}
		if l, _, err = o.cache.acquire(ctx, ptr.Repo, ptr.Commit, ptr.Format, stateDir, func(layer) error { return nil }); err != nil {
			return nil, fmt.Errorf("open workspace %s: %w", dir, err)
		}
	} else if err := addRef(l, stateDir); err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err) // a ref lost in a crash, taken again
	}
	return &overlayWorkspace{dir: dir, stateDir: stateDir, layer: l}, nil
}

// checkCreate checks Create's arguments and returns the commit's object
// format and the absolute directories.
func checkCreate(commit, dir, stateDir string) (format, absDir, absState string, err error) {
	if !isObjectID(commit) {
		return "", "", "", fmt.Errorf("%q is not a full commit id", commit)
	}
	format = "sha1"
	if len(commit) == 64 {
		format = "sha256"
	}
	if absDir, err = filepath.Abs(dir); err != nil {
		return "", "", "", err
	}
	if absState, err = filepath.Abs(stateDir); err != nil {
		return "", "", "", err
	}
	if rel, err := filepath.Rel(absDir, absState); err != nil || rel == "." || !strings.HasPrefix(rel, "..") {
		return "", "", "", fmt.Errorf("state directory %s must be outside %s", absState, absDir)
	}
	return format, absDir, absState, nil
}

// overlayWorkspace is a workspace made by the overlay Provider.
type overlayWorkspace struct {
	dir, stateDir string
	layer         layer // its tree is the lower layer
	made          bool

	once  sync.Once // maps m
	m     *mappedManifest
	count int // the layer's entries
	err   error
}

func (w *overlayWorkspace) Dir() string { return w.dir }

// Layers implements Layered.
func (w *overlayWorkspace) Layers() overlay.Layers {
	return overlay.Layers{Lower: w.layer.tree(), Upper: w.dir, Work: filepath.Join(w.stateDir, workName)}
}

// LayerMade implements Layered.
func (w *overlayWorkspace) LayerMade() bool { return w.made }

// Scan implements Workspace: it reads the upper layer only.
func (w *overlayWorkspace) Scan(ctx context.Context, lim Limits) (*ChangeSet, error) {
	w.once.Do(func() {
		var info layerInfo
		if info, w.err = readLayerInfo(w.layer); w.err == nil {
			w.count = info.Files
			w.m, w.err = mapManifest(w.layer.dir)
		}
	})
	if w.err != nil {
		return nil, fmt.Errorf("scan %s: %w", w.dir, w.err)
	}
	cs, err := scanUpper(ctx, w.dir, w.layer.tree(), w.m, w.count, lim)
	if err == nil {
		cs.base = &exportBase{format: w.m.format, commit: w.m.commit, treesDir: w.layer.dir}
	}
	return cs, err
}
