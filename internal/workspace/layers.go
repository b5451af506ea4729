package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/bootid"
	"github.com/agentrun/agentrun/internal/later"
)

// LayerCache holds the lower layers of overlay workspaces: one checkout
// per base commit, made once and shared, read-only, by every workspace on
// that commit. Under its directory ($AGENTRUN_HOME/cache/layers):
//
//	<key>/tree/                the checkout, with its shallow .git, as NewCheckout makes it
//	<key>/workspace-manifest   what the tree holds (path, mode, blob), for the scan
//	<key>/info                 commit, object format, size, the boot it was made in
//	<key>/synced               there once the layer is on disk for good (syncfs)
//	<key>/used                 its modification time is the layer's last use
//	<key>/refs/<ref>           one per workspace on the layer: a symlink to its state directory
//	<key>/spare/               a copy of the tree for the next copy workspace (spares.go)
//	<key>.lock                 flock: shared while a workspace takes its ref, exclusive to make or remove the layer
//	tmp/                       layers being made, and layers being removed
//
// The key is the commit id (with the layout's version): a commit names its
// tree and so the layer's content, whichever repository it came from. A
// layer appears whole or not at all: it is made in tmp/ and renamed into
// place. A ref is live while its state directory still says it uses the
// layer; a layer without live refs is unused and may be collected.
type LayerCache struct {
	dir   string
	syncs sync.WaitGroup // the background syncs of layers this process made

	// Spares (spares.go): made in the background by this process, and
	// which layers are getting one now; none once a move across file
	// systems failed (or for a test), and the most files a layer may have
	// for one (0: maxSpareFiles).
	spares        later.Work
	sparing       sync.Map
	noSpares      atomic.Bool
	maxSpareFiles int
	// spareDelay is how long a spare waits before it is made, unless
	// WaitSpares hurries it (0: defaultSpareDelay).
	spareDelay time.Duration
}

// NewLayerCache returns the cache rooted at dir (made when first used).
func NewLayerCache(dir string) *LayerCache { return &LayerCache{dir: dir} }

// Dir is the cache's directory.
func (c *LayerCache) Dir() string { return c.dir }

const (
	layerVersion   = "v1"
	layerInfoName  = "info"
	layerSynced    = "synced"
	layerUsed      = "used"
	layerRefs      = "refs"
	layerTree      = "tree"
	layerLockSufix = ".lock"
)

// layerInfo is a layer's info file.
type layerInfo struct {
	Version string    `json:"version"`
	Commit  string    `json:"commit"`
	Format  string    `json:"format"`
	Bytes   int64     `json:"bytes"`
	Files   int       `json:"files"`
	Boot    string    `json:"boot"`
	Made    time.Time `json:"made"`
}

// layer is one layer of the cache.
type layer struct {
	key, dir string
}

func (l layer) tree() string { return filepath.Join(l.dir, layerTree) }

func layerKey(commit string) string { return layerVersion + "-" + commit }

func (c *LayerCache) layer(key string) layer { return layer{key: key, dir: filepath.Join(c.dir, key)} }

func (c *LayerCache) lockPath(key string) string { return filepath.Join(c.dir, key+layerLockSufix) }

func (c *LayerCache) tmpDir() string { return filepath.Join(c.dir, "tmp") }

// acquire returns the layer of commit, made from repo if the cache does
// not hold it yet, with a ref for the workspace whose state directory is
// stateDir. attach runs while the layer cannot be removed, before the ref
// is written: it records in stateDir that the workspace uses the layer,
// which is what makes the ref live. made reports a layer this call made.
func (c *LayerCache) acquire(ctx context.Context, repo, commit, format, stateDir string, attach func(layer) error) (l layer, made bool, err error) {
	return c.withLayer(ctx, repo, commit, format, func(l layer) error {
		if err := attach(l); err != nil {
			return err
		}
		return addRef(l, stateDir)
	})
}

// withLayer runs fn on commit's layer, made first if the cache lacks it,
// under the layer's lock (no one removes it meanwhile), and marks the
// layer used. made says this call made it.
func (c *LayerCache) withLayer(ctx context.Context, repo, commit, format string, fn func(layer) error) (l layer, made bool, err error) {
	key := layerKey(commit)
	l = c.layer(key)
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return l, false, fmt.Errorf("layer cache: %w", err)
	}
	lock, err := lockFile(ctx, c.lockPath(key), unix.LOCK_SH)
	if err != nil {
		return l, false, fmt.Errorf("layer %s: %w", key, err)
	}
	ok, err := c.usable(l, false)
	if err == nil && !ok {
		// Made, or removed, under the exclusive lock only.
		_ = lock.Close()
		if lock, err = lockFile(ctx, c.lockPath(key), unix.LOCK_EX); err != nil {
			return l, false, fmt.Errorf("layer %s: %w", key, err)
		}
		if ok, err = c.usable(l, true); err == nil && !ok {
			err = c.make(ctx, l, repo, commit, format)
			made = err == nil
		}
	}
	defer lock.Close()
	if err == nil {
		err = fn(l)
	}
	if err != nil {
		return l, false, fmt.Errorf("layer %s: %w", key, err)
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(l.dir, layerUsed), now, now)
	return l, made, nil
}

// usable reports a layer that is in place and whole. Under the shared
// lock (exclusive false) anything else is just not usable; under the
// exclusive lock a layer that is in the way is removed first, when no
// workspace uses it: a damaged one, or one made in an earlier boot and
// never synced, which may have lost data in a crash. One in use is kept
// (its workspaces were made on it; an unsynced one is synced now).
func (c *LayerCache) usable(l layer, exclusive bool) (bool, error) {
	info, err := readLayerInfo(l)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Lstat(l.dir); errors.Is(serr, os.ErrNotExist) {
			return false, nil
		}
	}
	whole := err == nil && info.Version == layerVersion
	if whole {
		if _, serr := os.Lstat(filepath.Join(l.dir, layerSynced)); serr == nil || info.Boot == bootid.ID() {
			return true, nil
		}
	}
	if !exclusive {
		return false, nil
	}
	if live, _ := liveRefs(l); live > 0 {
		if !whole {
			return false, fmt.Errorf("layer %s is damaged and in use (%d workspaces): %v", l.dir, live, err)
		}
		return true, syncLayer(l)
	}
	return false, c.discard(l)
}

// make builds the layer of commit from repo in tmp/ and renames it into
// place; it runs under the layer's exclusive lock. The layer is synced to
// disk in the background afterwards (see usable for a crash meanwhile).
func (c *LayerCache) make(ctx context.Context, l layer, repo, commit, format string) (err error) {
	tmp, err := c.newTemp()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = RemoveTree(tmp)
		}
	}()
	tree := filepath.Join(tmp, layerTree)
	if err := os.Mkdir(tree, 0o755); err != nil {
		return err
	}
	if err := populate(ctx, repo, commit, format, tree); err != nil {
		return err
	}
	m, err := recordManifest(ctx, tree, commit, format)
	if err != nil {
		return err
	}
	sortEntries(m.entries) // the scan searches it in place (manifest_mapped.go)
	if err := writeManifest(tmp, m); err != nil {
		return err
	}
	for _, d := range []string{layerRefs} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, layerUsed), nil, 0o644); err != nil {
		return err
	}
	// What the layer holds: its files' sizes (as the manifest stat'ed
	// them, in whole blocks) and its .git, without another walk.
	bytes, _, _ := DiskUse(filepath.Join(tree, ".git"), 0)
	for i := range m.entries {
		bytes += (m.entries[i].size + 4095) &^ 4095
	}
	info := layerInfo{Version: layerVersion, Commit: commit, Format: format, Bytes: bytes, Files: len(m.entries), Boot: bootid.ID(), Made: time.Now().UTC()}
	return c.publish(tmp, l, info)
}

// newTemp makes an empty directory (mode 0755) in the cache's tmp, where
// a layer is built before publish moves it into place.
func (c *LayerCache) newTemp() (string, error) {
	if err := os.MkdirAll(c.tmpDir(), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(c.tmpDir(), "make-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// publish writes info into tmp, a layer built whole, moves it into place
// as l, and syncs it to disk in the background, under the layer's shared
// lock (so that it is not removed meanwhile). On error tmp is left to the
// caller.
func (c *LayerCache) publish(tmp string, l layer, info any) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, layerInfoName), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, l.dir); err != nil {
		return err
	}
	syncDir(c.dir)
	c.syncs.Go(func() {
		lock, err := lockFile(context.Background(), c.lockPath(l.key), unix.LOCK_SH)
		if err != nil {
			return
		}
		defer lock.Close()
		if _, err := os.Lstat(l.dir); err == nil {
			_ = syncLayer(l)
		}
	})
	return nil
}

// Wait waits for what this cache does in the background: the syncs of
// the layers it made, and its spares (those waiting to be made are made at
// once, as WaitSpares does).
func (c *LayerCache) Wait() {
	c.syncs.Wait()
	c.WaitSpares()
}

// syncLayer writes the file system holding l to disk and marks l synced.
func syncLayer(l layer) error {
	fd, err := unix.Open(l.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := syncFS(fd); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, layerSynced), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// discard moves l out of place (atomically) and removes it. It runs
// under the layer's exclusive lock.
func (c *LayerCache) discard(l layer) error {
	if err := os.MkdirAll(c.tmpDir(), 0o755); err != nil {
		return err
	}
	gone, err := os.MkdirTemp(c.tmpDir(), "remove-")
	if err != nil {
		return err
	}
	dst := filepath.Join(gone, l.key)
	if err := os.Rename(l.dir, dst); err != nil {
		_ = os.Remove(gone)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	syncDir(c.dir)
	return os.RemoveAll(gone)
}

func readLayerInfo(l layer) (layerInfo, error) {
	var info layerInfo
	b, err := os.ReadFile(filepath.Join(l.dir, layerInfoName))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("read %s: %w", filepath.Join(l.dir, layerInfoName), err)
	}
	return info, nil
}

// refName is the name of the ref of the workspace whose state directory
// is stateDir.
func refName(stateDir string) string {
	h := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(h[:12])
}

// addRef records that the workspace of stateDir uses l: a symlink to
// stateDir (made at once, and not synced: a ref lost in a crash lets the
// layer be collected, and opening the workspace makes it again).
func addRef(l layer, stateDir string) error {
	err := os.Symlink(stateDir, filepath.Join(l.dir, layerRefs, refName(stateDir)))
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// liveRefs counts l's live refs: each names a state directory that still
// says it uses l. It drops the refs that are not live (a workspace that
// was removed, or made again on another commit).
func liveRefs(l layer) (int, error) { return countRefs(l, nil) }

// countRefs is liveRefs, counting the refs of the state directories in
// gone as not live (and leaving them).
func countRefs(l layer, gone map[string]bool) (int, error) {
	dir := filepath.Join(l.dir, layerRefs)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	live := 0
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		stateDir, err := os.Readlink(p)
		if err != nil {
			continue
		}
		if gone[stateDir] {
			continue
		}
		if readSetupPointer(stateDir) == l.key {
			live++ // (a setup layer: setup_layers.go)
			continue
		}
		if ptr, err := readPointer(stateDir); err == nil && ptr.Layer == l.key {
			live++
			continue
		}
		_ = os.Remove(p)
	}
	return live, nil
}

// lockFile takes a flock (how: LOCK_SH or LOCK_EX) on path, made if need
// be, waiting until ctx ends. A lock file removed by a collector while we
// waited is opened again, so the lock held is always the one at path.
func lockFile(ctx context.Context, path string, how int) (*os.File, error) {
	delay := time.Millisecond
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		for {
			err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
			if err != unix.EWOULDBLOCK && err != unix.EINTR {
				break
			}
			select {
			case <-ctx.Done():
				_ = f.Close()
				return nil, ctx.Err()
			case <-time.After(delay):
			}
			delay = min(2*delay, 100*time.Millisecond)
		}
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &now) == nil && held.Dev == now.Dev && held.Ino == now.Ino {
			return f, nil
		}
		_ = f.Close()
	}
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
