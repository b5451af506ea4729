package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// Store implements run.Store on the file system.
type Store struct {
	L layout.Layout

	journal journalCache
	lazy    lazySyncs
}

var _ run.Store = (*Store)(nil)

// Prefixes of the scratch directories in runs/. They start with '.', which
// is outside run.IDAlphabet, so no run id can collide with them and every
// listing skips them.
const (
	tmpPrefix = ".tmp-" // a run being created
	delPrefix = ".del-" // a run being deleted
)

// staleScratch is how old a scratch directory must be before Open removes
// it as the leftover of a crashed Create or Delete.
const staleScratch = time.Hour

// Open returns the store rooted at home, creating home/runs if needed, and
// removes scratch directories that crashed creates or deletes left behind.
func Open(home string) (*Store, error) {
	s := &Store{L: layout.Layout{Home: home}}
	if err := os.MkdirAll(s.L.Runs(), 0o700); err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	s.sweepScratch(time.Now().Add(-staleScratch))
	return s, nil
}

// RunDir is the directory of run id (which must be a valid id).
func (s *Store) RunDir(id string) string { return s.L.RunDir(id) }

// Create stores a new run; see run.Store.
func (s *Store) Create(ctx context.Context, r *run.Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := run.ValidateID(r.ID); err != nil {
		return err
	}
	if _, err := os.Lstat(s.L.RunDir(r.ID)); err == nil {
		return fmt.Errorf("create run %s: %w", r.ID, run.ErrExists)
	}
	seq, seqSynced, err := s.nextSeq(ctx)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	now := time.Now().UTC()
	c := *r
	c.Seq, c.Version = seq, 1
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	data, err := encodeRun(&c)
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if err := s.createDir(r.ID, data, seqSynced); err != nil {
		return err
	}
	*r = c
	return nil
}

// createDir builds the run directory under a scratch name and renames it
// into place, so the run appears whole or not at all. Before the rename,
// the record, the scratch directory's entries and the submission counter
// (seqSynced) are made durable, side by side; then the rename is.
func (s *Store) createDir(id string, data []byte, seqSynced func() error) error {
	tmp := filepath.Join(s.L.Runs(), tmpPrefix+id+"-"+randomSuffix())
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("create run %s: %w", id, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	for _, name := range []string{filepath.Base(s.L.RunLock(id)), filepath.Base(s.L.Events(id))} {
		f, err := os.OpenFile(filepath.Join(tmp, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("create run %s: %w", id, err)
		}
		f.Close()
	}
	// Nothing reads the scratch directory: run.json is written in place.
	if err := writeDurable(filepath.Join(tmp, filepath.Base(s.L.RunJSON(id))), data, func() error { return syncDir(tmp) }, seqSynced); err != nil {
		return fmt.Errorf("create run %s: %w", id, err)
	}
	if err := renameNoReplace(tmp, s.L.RunDir(id)); err != nil {
		if errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("create run %s: %w", id, run.ErrExists)
		}
		return fmt.Errorf("create run %s: %w", id, err)
	}
	ok = true
	if err := syncDir(s.L.Runs()); err != nil {
		return fmt.Errorf("create run %s: %w", id, err)
	}
	return nil
}

// Get returns the run with the full id; see run.Store.
func (s *Store) Get(ctx context.Context, id string) (*run.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := run.ValidateID(id); err != nil {
		return nil, err
	}
	return s.read(id)
}

// read loads run.json of a validated id. The record is opened without
// following a symlink and without blocking (a FIFO planted as run.json
// must not hang every command), and must be a regular file: anything else,
// or a record that cannot be opened for its permissions, is a damaged
// record (run.ErrCorrupt), which `clean --force` removes.
func (s *Store) read(id string) (*run.Run, error) {
	data, err := readRegular(s.L.RunJSON(id), maxRecord)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, derr := os.Lstat(s.L.RunDir(id)); derr == nil {
				return nil, fmt.Errorf("run %s: run.json is missing: %w", id, run.ErrCorrupt)
			}
			return nil, fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		if errors.Is(err, errNotRegular) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) ||
			errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENXIO) {
			return nil, fmt.Errorf("run %s: run.json cannot be read: %v: %w", id, err, run.ErrCorrupt)
		}
		return nil, fmt.Errorf("read run %s: %w", id, err)
	}
	return decodeRun(id, data)
}

var errNotRegular = errors.New("not a regular file")

// maxRecord bounds what is read of a run.json (records are kilobytes).
const maxRecord = 64 << 20

// readRegular reads a regular file of at most limit bytes (0: any size)
// at path: O_NOFOLLOW, O_NONBLOCK (an open of a FIFO returns at once; its
// type is then refused before any read).
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s: %w", filepath.Base(path), fileKind(fi.Mode()), errNotRegular)
	}
	if limit <= 0 {
		return io.ReadAll(f)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes: %w", filepath.Base(path), fi.Size(), errNotRegular)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// fileKind names what a file that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

func decodeRun(id string, data []byte) (*run.Run, error) {
	r := new(run.Run)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("run %s: run.json: %v: %w", id, err, run.ErrCorrupt)
	}
	if r.ID != id {
		return nil, fmt.Errorf("run %s: run.json names run %q: %w", id, r.ID, run.ErrCorrupt)
	}
	if !r.State.Valid() {
		// Not "active": an unknown state must not be taken for a run whose
		// supervisor died and be rewritten to interrupted.
		return nil, fmt.Errorf("run %s: run.json has an unknown state %q: %w", id, r.State, run.ErrCorrupt)
	}
	return r, nil
}

func encodeRun(r *run.Run) ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode run: %w", err)
	}
	return append(b, '\n'), nil
}

// Resolve turns a unique prefix into a full id; see run.Store.
func (s *Store) Resolve(ctx context.Context, prefix string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := run.ValidatePrefix(prefix); err != nil {
		return "", err
	}
	if len(prefix) == run.IDLength {
		if _, err := os.Lstat(s.L.RunDir(prefix)); err == nil {
			return prefix, nil
		}
		return "", fmt.Errorf("run %s: %w", prefix, run.ErrNotFound)
	}
	var match []string
	for _, id := range s.runIDs() {
		if strings.HasPrefix(id, prefix) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("run %s: %w", prefix, run.ErrNotFound)
	case 1:
		return match[0], nil
	}
	slices.Sort(match)
	return "", fmt.Errorf("%w: %q matches %s", run.ErrAmbiguous, prefix, strings.Join(match, ", "))
}

// runIDs lists the names in runs/ that are valid run ids, skipping scratch
// directories and anything else.
func (s *Store) runIDs() []string {
	ents, err := os.ReadDir(s.L.Runs())
	if err != nil {
		return nil
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.IsDir() && run.ValidateID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// Delete removes the run and everything stored for it; see run.Store.
// The run is first renamed out of runs/ under its lock, so it vanishes at
// once for every reader; the removal that follows makes read-only
// directories writable (never through a symlink).
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := run.ValidateID(id); err != nil {
		return err
	}
	lock, err := lockFile(ctx, s.L.RunLock(id), os.O_RDWR)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	gone := filepath.Join(s.L.Runs(), delPrefix+id+"-"+randomSuffix())
	err = os.Rename(s.L.RunDir(id), gone)
	lock.Close()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	s.journal.forget(id)
	if err := syncDir(s.L.Runs()); err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	if err := removeAll(gone); err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	return nil
}

// sweepScratch removes scratch directories last modified before cutoff.
func (s *Store) sweepScratch(cutoff time.Time) {
	ents, err := os.ReadDir(s.L.Runs())
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || !(strings.HasPrefix(n, tmpPrefix) || strings.HasPrefix(n, delPrefix)) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			removeAll(filepath.Join(s.L.Runs(), n))
		}
	}
}

// removeAll is os.RemoveAll that also removes trees holding read-only
// directories: on failure it makes the tree writable and tries again.
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	makeWritable(path)
	return os.RemoveAll(path)
}

// makeWritable makes every directory under root owner-writable and
// searchable. Directories are found by lstat and changed only after a
// second lstat, so a symlink's target is never touched.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d == nil || !d.IsDir() {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		return nil
	})
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
