package workspace

// spares.go: a spare copy of a small layer, made in the background a
// moment after a copy workspace on its commit (once that run's agent has
// likely started), so that the next copy workspace on that commit (an
// agent host's next run on the same base, a developer's next submit) is a
// few renames instead of a copy of every file and an fsync of its
// manifest on the path to the agent's start.
//
//	<key>/spare/tree/        a copy of the layer's tree, nobody's yet
//	<key>/spare/state/       its workspace state (manifest, trees), as Create writes it
//	<key>/spare/boot         the boot it was made in
//	<key>/spare-tmp-*        a spare being made
//	<key>/spare-taken-*      a spare being taken
//
// A spare appears whole or not at all (made aside, renamed into place),
// and one workspace takes it (renamed aside first: of two takers, one
// wins, the other copies as before). One from an earlier boot is never
// used: its files were not synced, and a crash may have lost some. It
// lives in its layer's directory, under the layer's lock, so that it goes
// when the layer is collected; List counts it in the layer's bytes.

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/bootid"
)

const (
	layerSpare       = "spare"
	spareState       = "state"
	spareBoot        = "boot"
	spareTempPrefix  = "spare-tmp-"
	spareTakenPrefix = "spare-taken-"
	// A spare is kept of layers this small only: it costs a copy of the
	// layer on disk, and a large copy in the background competes with the
	// agent for the disk.
	maxSpareFiles = 10000
	maxSpareBytes = 128 << 20
	// staleSpare is the age past which what a spare's maker or taker left
	// (it was killed meanwhile) is removed.
	staleSpare = time.Hour
	// spareTimeout bounds the making of one spare, its wait for the
	// layer's lock included.
	spareTimeout = time.Minute
	// defaultSpareDelay is how long a spare waits before it is made. The
	// workspace that took the last one belongs to a run still on its way
	// to its agent's start (its sandbox, its first writes to the server),
	// and a copy of the layer made now would compete with it for the CPU
	// and the disk; the next run on the commit rarely comes sooner.
	defaultSpareDelay = 100 * time.Millisecond
)

// takeSpare makes the workspace of commit at dir (which fill says exists,
// empty, and may already be bound into a sandbox: only its content is
// moved in; else dir is made) with state directory stateDir from the
// commit layer's spare. It reports false, having changed nothing, when
// there is no usable spare; the caller then copies as usual.
func (c *LayerCache) takeSpare(ctx context.Context, commit, dir, stateDir string, fill bool) (Workspace, bool) {
	if c.noSpares.Load() {
		return nil, false
	}
	l := c.layer(layerKey(commit))
	spare := filepath.Join(l.dir, layerSpare)
	if _, err := os.Lstat(spare); err != nil {
		return nil, false
	}
	lock, err := lockFile(ctx, c.lockPath(l.key), unix.LOCK_SH)
	if err != nil {
		return nil, false
	}
	defer lock.Close()
	if ok, err := c.usable(l, false); err != nil || !ok {
		return nil, false
	}
	// Aside, under a name of its own: another taker's rename then fails.
	taken, err := os.MkdirTemp(l.dir, spareTakenPrefix)
	if err != nil {
		return nil, false
	}
	if err := os.Remove(taken); err != nil {
		return nil, false
	}
	if err := os.Rename(spare, taken); err != nil {
		return nil, false
	}
	// What the move leaves (two empty directories and the boot file) is
	// removed once the workspace is the caller's: it is nobody's path to
	// the agent's start.
	defer c.spares.Go(func() { _ = RemoveTree(taken) })
	if b, err := os.ReadFile(filepath.Join(taken, spareBoot)); err != nil || string(b) != bootid.ID() {
		return nil, false
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, false
	}
	if err := moveSpare(filepath.Join(taken, layerTree), dir, filepath.Join(taken, spareState), stateDir, fill); err != nil {
		if errors.Is(err, unix.EXDEV) {
			c.noSpares.Store(true) // the data directory spans file systems: no spare will do
		}
		return nil, false
	}
	ws, err := checkoutProvider{}.Open(ctx, dir, stateDir)
	if err != nil {
		undoSpare(dir, stateDir, fill)
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(l.dir, layerUsed), now, now)
	return ws, true
}

// moveSpare moves a spare's tree to dir (into it, entry by entry, when
// fill: the directory itself stays, whoever holds it) and its state files
// into stateDir. On error what it moved is removed again.
func moveSpare(tree, dir, state, stateDir string, fill bool) (err error) {
	defer func() {
		if err != nil {
			undoSpare(dir, stateDir, fill)
		}
	}()
	if fill {
		if err := moveEntries(tree, dir); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		if err := os.Rename(tree, dir); err != nil {
			return err
		}
	}
	return moveEntries(state, stateDir)
}

// moveEntries renames each entry of directory from into directory to.
func moveEntries(from, to string) error {
	names, err := dirNames(from)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(from, n), filepath.Join(to, n)); err != nil {
			return err
		}
	}
	return nil
}

// undoSpare removes what a spare's move left in dir and stateDir.
func undoSpare(dir, stateDir string, fill bool) {
	if fill {
		emptyDir(dir)
	} else {
		_ = RemoveTree(dir)
	}
	for _, n := range []string{manifestName, treesName} {
		_ = os.Remove(filepath.Join(stateDir, n))
	}
}

// spareAfter makes a spare of commit's layer in the background, unless
// the layer is too large for one, has one, or this cache is making it.
// WaitSpares waits for it.
func (c *LayerCache) spareAfter(commit, format string) {
	if c.noSpares.Load() {
		return
	}
	key := layerKey(commit)
	if _, busy := c.sparing.LoadOrStore(key, true); busy {
		return
	}
	c.spares.After(cmp.Or(c.spareDelay, defaultSpareDelay), func() {
		defer c.sparing.Delete(key)
		// Bounded: a process waits for it before it exits, and the
		// layer's lock may be another's for a while (a collection).
		ctx, cancel := context.WithTimeout(context.Background(), spareTimeout)
		defer cancel()
		_ = c.makeSpare(ctx, commit, format)
	})
}

// WaitSpares makes the spares still waiting to be made at once, and waits
// for all this cache is making (a process about to exit would leave a
// half-made one behind, for a later one to remove).
func (c *LayerCache) WaitSpares() { c.spares.Wait() }

// makeSpare makes the spare of commit's layer, under the layer's shared
// lock: a layer that is not in place (collected meanwhile) gets none.
func (c *LayerCache) makeSpare(ctx context.Context, commit, format string) error {
	l := c.layer(layerKey(commit))
	lock, err := lockFile(ctx, c.lockPath(l.key), unix.LOCK_SH)
	if err != nil {
		return err
	}
	defer lock.Close()
	if ok, err := c.usable(l, false); err != nil || !ok {
		return err
	}
	info, err := readLayerInfo(l)
	if err != nil || info.Files > c.spareFiles() || info.Bytes > maxSpareBytes {
		return err
	}
	removeStaleSpares(l)
	if _, err := os.Lstat(filepath.Join(l.dir, layerSpare)); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(l.dir, spareTempPrefix)
	if err != nil {
		return err
	}
	defer RemoveTree(tmp)
	tree, state := filepath.Join(tmp, layerTree), filepath.Join(tmp, spareState)
	if err := os.Mkdir(tree, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		return err
	}
	if err := copyTree(ctx, l.tree(), tree); err != nil {
		return err
	}
	m, err := recordManifest(ctx, tree, commit, format)
	if err != nil {
		return err
	}
	if err := writeManifest(state, m); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, spareBoot), []byte(bootid.ID()), 0o644); err != nil {
		return err
	}
	// Fails when another process put a spare in place meanwhile: ours goes.
	return os.Rename(tmp, filepath.Join(l.dir, layerSpare))
}

// spareFiles is the most files a layer may hold to get a spare.
func (c *LayerCache) spareFiles() int {
	if c.maxSpareFiles > 0 {
		return c.maxSpareFiles
	}
	return maxSpareFiles
}

// removeStaleSpares removes what makers and takers killed on the way left
// in l's directory.
func removeStaleSpares(l layer) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), spareTempPrefix) && !strings.HasPrefix(e.Name(), spareTakenPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleSpare {
			_ = RemoveTree(filepath.Join(l.dir, e.Name()))
		}
	}
}

// spareBytes is what l's spare holds on disk: the layer's bytes when it
// has one.
func spareBytes(l layer, layerBytes int64) int64 {
	if _, err := os.Lstat(filepath.Join(l.dir, layerSpare)); err == nil {
		return layerBytes
	}
	return 0
}
