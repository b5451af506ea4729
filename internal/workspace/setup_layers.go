package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/bootid"
)

// Setup layers live in the LayerCache beside the checkouts, under the
// same rules (made whole in tmp/ and renamed into place, a lock per key,
// refs from the workspaces that use them, collected by Collect):
//
//	<key>/tree/   what the setup command changed in the workspace: an
//	              overlay's upper layer (Mode overlay), or the whole tree
//	              after the setup (Mode copy, made where no overlay could be)
//	<key>/home/   what it left in its HOME (toolchain caches), shown
//	              read-only to the runs on the layer
//	<key>/info    SetupInfo
//
// The key is a digest of SetupInput: the same base commit, command,
// allowlist, backend and image give the same layer, whichever run asks.

// SetupInput is what a setup layer is made from.
type SetupInput struct {
	Repo    string   `json:"-"` // where the commit was found (listed, not part of the key)
	Commit  string   `json:"commit"`
	Command string   `json:"command"`
	Allow   []string `json:"allow"`
	Backend string   `json:"backend"`
	Image   string   `json:"image"`
}

// setupPrefix starts every setup layer's key (after the layout version,
// so that the cache's listing and collection take them as layers).
const setupPrefix = layerVersion + "-setup-"

// SetupKey is the layer key of in.
func SetupKey(in SetupInput) string {
	in.Allow = slices.Clone(in.Allow)
	slices.Sort(in.Allow)
	in.Allow = slices.Compact(in.Allow)
	if in.Allow == nil {
		in.Allow = []string{}
	}
	b, _ := json.Marshal(in)
	h := sha256.Sum256(b)
	return setupPrefix + hex.EncodeToString(h[:20])
}

// Setup layer modes: how its tree was made.
const (
	SetupOverlay = "overlay" // tree is an overlay's upper layer over the checkout
	SetupCopy    = "copy"    // tree is the whole workspace after the setup
)

// SetupInfo is a setup layer's info file. Its first fields are the
// checkout layers' (layerInfo), so that the cache lists and collects
// both alike.
type SetupInfo struct {
	Version  string    `json:"version"`
	Commit   string    `json:"commit"`
	Bytes    int64     `json:"bytes"`
	Files    int       `json:"files"`
	Boot     string    `json:"boot"`
	Made     time.Time `json:"made"`
	Kind     string    `json:"kind"` // "setup"
	Repo     string    `json:"repo,omitempty"`
	Command  string    `json:"command"`
	Allow    []string  `json:"allow,omitempty"`
	Backend  string    `json:"backend"`
	Image    string    `json:"image,omitempty"`
	Mode     string    `json:"mode"`
	Duration string    `json:"duration"`
}

// SetupBuild is where a builder makes a setup layer, inside a new
// directory of the cache's tmp/.
type SetupBuild struct {
	// Tree is an empty directory: the upper layer of an overlay on the
	// checkout for a build in Mode overlay; for one in Mode copy the
	// builder replaces it with a checkout of the commit (it may remove
	// and make it again) and runs the setup in it.
	Tree string
	// Home is an empty directory, the setup's HOME: what is left in it
	// (but tmp/) is kept.
	Home string
	// Scratch is an empty directory on the same file system for the
	// builder's own use (an overlay's work directory); it is removed.
	Scratch string
}

// SetupBuilder runs the setup into b and returns the mode its tree is
// in. An error leaves nothing in the cache.
type SetupBuilder func(ctx context.Context, b SetupBuild) (mode string, err error)

// SetupLayer is a setup layer of the cache, in use by a workspace.
type SetupLayer struct {
	Key  string
	Dir  string
	Info SetupInfo
	// Made: this call built it (else it was cached).
	Made bool
}

// Tree is the layer's tree (see SetupInfo.Mode).
func (l SetupLayer) Tree() string { return filepath.Join(l.Dir, layerTree) }

// Home is what the setup left in its HOME.
func (l SetupLayer) Home() string { return filepath.Join(l.Dir, setupHome) }

const (
	setupHome = "home"
	// setupPointerName is the workspace's record, in its state directory,
	// that it uses a setup layer: a symlink whose target is the key (what
	// makes the layer's ref live, as pointerName does for the checkout).
	setupPointerName = "workspace-setup"
)

// readSetupPointer is the key of the setup layer the workspace of
// stateDir uses ("" for none).
func readSetupPointer(stateDir string) string {
	key, err := os.Readlink(filepath.Join(stateDir, setupPointerName))
	if err != nil || !strings.HasPrefix(key, setupPrefix) {
		return ""
	}
	return key
}

// AcquireSetup returns the setup layer of in, built by build when the
// cache does not hold it yet, and records that the workspace whose state
// directory is stateDir uses it. Concurrent calls for one key wait for
// each other (the layer's lock, held for the whole build): one builds,
// the others take what it made. A build that fails leaves nothing.
func (c *LayerCache) AcquireSetup(ctx context.Context, in SetupInput, stateDir string, build SetupBuilder) (SetupLayer, error) {
	key := SetupKey(in)
	l := c.layer(key)
	out := SetupLayer{Key: key, Dir: l.dir}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return out, fmt.Errorf("layer cache: %w", err)
	}
	lock, err := lockFile(ctx, c.lockPath(key), unix.LOCK_SH)
	if err != nil {
		return out, fmt.Errorf("setup layer %s: %w", key, err)
	}
	ok, err := c.usable(l, false)
	if err == nil && !ok {
		_ = lock.Close()
		if lock, err = lockFile(ctx, c.lockPath(key), unix.LOCK_EX); err != nil {
			return out, fmt.Errorf("setup layer %s: %w", key, err)
		}
		if ok, err = c.usable(l, true); err == nil && !ok {
			err = c.buildSetup(ctx, l, in, build)
			out.Made = err == nil
		}
	}
	defer lock.Close()
	if err == nil {
		out.Info, err = readSetupInfo(l)
	}
	if err == nil {
		p := filepath.Join(stateDir, setupPointerName)
		if err = os.MkdirAll(stateDir, 0o700); err == nil {
			if err = os.Remove(p); errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		}
		if err == nil {
			err = os.Symlink(key, p)
		}
	}
	if err == nil {
		err = addRef(l, stateDir)
	}
	if err != nil {
		return out, fmt.Errorf("setup layer %s: %w", key, err)
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(l.dir, layerUsed), now, now)
	return out, nil
}

// buildSetup makes the layer l in tmp/ with build and renames it into
// place; it runs under the layer's exclusive lock.
func (c *LayerCache) buildSetup(ctx context.Context, l layer, in SetupInput, build SetupBuilder) (err error) {
	tmp, err := c.newTemp()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = RemoveTree(tmp)
		}
	}()
	b := SetupBuild{Tree: filepath.Join(tmp, layerTree), Home: filepath.Join(tmp, setupHome), Scratch: filepath.Join(tmp, "scratch")}
	for _, d := range []string{tmp, b.Tree, b.Home, b.Scratch, filepath.Join(b.Home, "tmp"), filepath.Join(tmp, layerRefs)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	t0 := time.Now()
	mode, err := build(ctx, b)
	if err != nil {
		return err
	}
	if mode != SetupOverlay && mode != SetupCopy {
		return fmt.Errorf("setup layer: unknown mode %q", mode)
	}
	took := time.Since(t0)
	for _, d := range []string{b.Scratch, filepath.Join(b.Home, "tmp")} {
		if err := RemoveTree(d); err != nil {
			return err
		}
	}
	// Toolchains leave their caches read-only (Go's module cache); the
	// layer's directories are made owner-writable so that the cache can
	// remove it again (the runs see it through read-only mounts).
	ownerWritable(tmp)
	bytes, files, _ := DiskUse(tmp, 0)
	info := SetupInfo{Version: layerVersion, Commit: in.Commit, Bytes: bytes, Files: files, Boot: bootid.ID(), Made: time.Now().UTC(),
		Kind: "setup", Repo: in.Repo, Command: in.Command, Allow: in.Allow, Backend: in.Backend, Image: in.Image, Mode: mode,
		Duration: took.Round(time.Millisecond).String()}
	if err := os.WriteFile(filepath.Join(tmp, layerUsed), nil, 0o644); err != nil {
		return err
	}
	return c.publish(tmp, l, info)
}

// ownerWritable adds the owner's write and search bits to every
// directory under dir (symlinks are not followed).
func ownerWritable(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d == nil || !d.IsDir() {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		return nil
	})
}

func readSetupInfo(l layer) (SetupInfo, error) {
	var info SetupInfo
	b, err := os.ReadFile(filepath.Join(l.dir, layerInfoName))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Kind != "setup" {
		return info, fmt.Errorf("read %s: not a setup layer's info (%v)", filepath.Join(l.dir, layerInfoName), err)
	}
	return info, nil
}

// CachedSetup is one setup layer of the cache, as ListSetup tells it.
type CachedSetup struct {
	Key        string    `json:"key"`
	Commit     string    `json:"commit"`
	Command    string    `json:"command"`
	Allow      []string  `json:"allow"`
	Backend    string    `json:"backend"`
	Image      string    `json:"image,omitempty"`
	Mode       string    `json:"mode"`
	Bytes      int64     `json:"bytes"`
	Duration   string    `json:"duration"`
	Made       time.Time `json:"created"`
	LastUsed   time.Time `json:"last_used"`
	Workspaces int       `json:"workspaces"`
}

// ListSetup returns the cache's setup layers whose commit keep says to
// (nil: all), most recently used first.
func (c *LayerCache) ListSetup(keep func(commit string) bool) ([]CachedSetup, error) {
	ents, err := os.ReadDir(c.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := []CachedSetup{}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), setupPrefix) {
			continue
		}
		l := c.layer(e.Name())
		info, err := readSetupInfo(l)
		if err != nil || (keep != nil && !keep(info.Commit)) {
			continue
		}
		cs := CachedSetup{Key: l.key, Commit: info.Commit, Command: info.Command, Allow: info.Allow, Backend: info.Backend, Image: info.Image,
			Mode: info.Mode, Bytes: info.Bytes, Duration: info.Duration, Made: info.Made, LastUsed: info.Made}
		if cs.Allow == nil {
			cs.Allow = []string{}
		}
		if fi, err := os.Stat(filepath.Join(l.dir, layerUsed)); err == nil {
			cs.LastUsed = fi.ModTime().UTC()
		}
		cs.Workspaces, _ = liveRefs(l)
		out = append(out, cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out, nil
}

// SetupLayerOf is the setup layer the workspace of stateDir uses (ok
// false: none, or it is gone from the cache).
func (c *LayerCache) SetupLayerOf(stateDir string) (SetupLayer, bool) {
	key := readSetupPointer(stateDir)
	if key == "" {
		return SetupLayer{}, false
	}
	l := c.layer(key)
	info, err := readSetupInfo(l)
	if err != nil {
		return SetupLayer{}, false
	}
	return SetupLayer{Key: key, Dir: l.dir, Info: info}, true
}
