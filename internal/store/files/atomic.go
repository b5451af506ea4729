package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data: a temp file in the same
// directory, fsync, rename over path, fsync the directory. A reader sees
// the old content or the new, never a mix; after a crash, one of the two.
func writeFileAtomic(path string, data []byte) error {
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
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%w: %w", errAfterRename, err)
	}
	return nil
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
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
