package files

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data: a temp file in the same
// directory, fsync, rename over path, and, when durable, fsync the
// directory. A reader sees the old content or the new, never a mix; after
// a crash, one of the two (without durable, the old one may come back
// after a power loss, until the file system has committed the rename).
// before, when not nil, must hold before the rename: what it returns
// fails the write, and path is left as it was.
func writeFileAtomic(path string, data []byte, before func() error, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := syncFile(f); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if !durable {
		return nil
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%w: %w", errAfterRename, err)
	}
	return nil
}

// writeDurable creates path (which must not exist) with data and fsyncs
// it, while the others run beside the fsync (more fsyncs); the first
// error of all of them is returned.
func writeDurable(path string, data []byte, others ...func() error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	errs := make(chan error, len(others))
	for _, o := range others {
		go func() { errs <- o() }()
	}
	err = syncFile(f)
	if err != nil {
		err = fmt.Errorf("fsync %s: %w", path, err)
	}
	for range others {
		err = cmp.Or(err, <-errs)
	}
	return err
}

// errAfterRename marks a writeFileAtomic error that came after the rename:
// the new content is in place (though perhaps not yet durable).
var errAfterRename = errors.New("replaced, but not synced")

// syncDir makes the entries of dir (creations, renames) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := syncFile(d); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
