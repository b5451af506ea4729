package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CachedLayer is one lower layer of the cache.
type CachedLayer struct {
	Key    string `json:"key"`
	Commit string `json:"commit"`
	// Bytes is what the layer holds on disk, with its spare copy if it
	// has one (spares.go).
	Bytes    int64     `json:"bytes"`
	Files    int       `json:"files"`
	Made     time.Time `json:"made"`
	LastUsed time.Time `json:"last_used"`
	// Workspaces is how many workspaces are on the layer (its live refs):
	// a layer with none is unused.
	Workspaces int `json:"workspaces"`
}

// List returns the cache's layers, least recently used first. Refs that
// are no longer live are dropped on the way.
func (c *LayerCache) List() ([]CachedLayer, error) { return c.list(nil) }

// list is List, counting the refs of the state directories in gone as
// not live (without dropping them).
func (c *LayerCache) list(gone map[string]bool) ([]CachedLayer, error) {
	ents, err := os.ReadDir(c.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []CachedLayer
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), layerVersion+"-") {
			continue
		}
		l := c.layer(e.Name())
		info, err := readLayerInfo(l)
		if err != nil {
			continue // being made or removed, or damaged: not a layer to count
		}
		cl := CachedLayer{Key: l.key, Commit: info.Commit, Bytes: info.Bytes + spareBytes(l, info.Bytes), Files: info.Files, Made: info.Made, LastUsed: info.Made}
		if fi, err := os.Stat(filepath.Join(l.dir, layerUsed)); err == nil {
			cl.LastUsed = fi.ModTime().UTC()
		}
		cl.Workspaces, _ = countRefs(l, gone)
		out = append(out, cl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

// CollectOptions say what Collect removes.
type CollectOptions struct {
	// Budget is what the cache may hold; 0 or less: no unused layer is
	// kept.
	Budget int64
	// DryRun removes nothing: Collect returns what it would remove.
	DryRun bool
	// Gone are state directories about to be removed (for a dry run that
	// goes with one of their workspaces): their refs count as not live.
	Gone map[string]bool
}

// Collect removes unused layers, the least recently used first, until the
// cache holds no more than o.Budget bytes. A layer in use, or locked
// because a workspace is being made on it, is never removed. total is
// what the cache holds afterwards (or would). It also removes what failed
// makes and removals left in tmp/.
func (c *LayerCache) Collect(ctx context.Context, o CollectOptions) (removed []CachedLayer, total int64, err error) {
	budget, dryRun := o.Budget, o.DryRun
	layers, err := c.list(o.Gone)
	if err != nil {
		return nil, 0, err
	}
	for _, l := range layers {
		total += l.Bytes
	}
	for _, cl := range layers {
		if err := ctx.Err(); err != nil {
			return removed, total, err
		}
		if budget > 0 && total <= budget {
			break
		}
		if cl.Workspaces > 0 {
			continue
		}
		if !dryRun {
			ok, err := c.remove(cl.Key)
			if err != nil {
				return removed, total, err
			}
			if !ok {
				continue
			}
		}
		removed = append(removed, cl)
		total -= cl.Bytes
	}
	if !dryRun {
		c.sweepTmp()
	}
	return removed, total, nil
}

// remove removes the layer key if it is unused, under its exclusive lock
// (not waited for: a layer being made or taken is in use). ok reports
// that it was removed.
func (c *LayerCache) remove(key string) (ok bool, err error) {
	path := c.lockPath(key)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false, nil
	}
	var held, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
		return false, nil // replaced meanwhile: someone else's now
	}
	l := c.layer(key)
	if live, err := liveRefs(l); err == nil && live > 0 {
		return false, nil
	}
	if err := c.discard(l); err != nil {
		return false, err
	}
	// Under the lock: a waiter that opened this file opens the path
	// again once it holds it (lockFile).
	_ = os.Remove(path)
	return true, nil
}

// sweepTmp removes what tmp/ holds from makes that died (a day old) and
// removals that did not finish (a minute old).
func (c *LayerCache) sweepTmp() {
	ents, err := os.ReadDir(c.tmpDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		age := time.Since(fi.ModTime())
		if (strings.HasPrefix(e.Name(), "make-") && age > 24*time.Hour) || (strings.HasPrefix(e.Name(), "remove-") && age > time.Minute) {
			_ = os.RemoveAll(filepath.Join(c.tmpDir(), e.Name()))
		}
	}
}
