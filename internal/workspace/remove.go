package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
)

// RemoveTree is os.RemoveAll for a workspace's trees: where that fails it
// makes every directory owner-writable and searchable and tries again,
// for the directories the kernel leaves without permissions in an
// overlay's work directory (its shared whiteout stays in one). A
// directory is changed only after a second lstat, so a symlink's target
// is never touched.
func RemoveTree(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if d == nil || !d.IsDir() {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
