package external

// templatesync.go: a template is copied into place without a sync (its
// warm-up run should not wait for the disk), so a crash soon after may
// leave it with files the disk never got: empty, or missing. Every later
// run of the CLI would then start from that damaged HOME. So a template
// says which boot made it (.boot-<key>), is synced in the background
// like a spare is made (by the supervisor as it exits at the latest), and
// then says so (.synced-<key>); one of an earlier boot that never got
// that far is removed before any run uses it, and the next run warms the
// CLI up again.

import (
	"io/fs"
	"os"
	"path/filepath"
)

const (
	templateBootPrefix   = ".boot-"
	templateSyncedPrefix = ".synced-"
)

// madeTemplate records that this boot made template key in dir, and syncs
// it in the background.
func madeTemplate(dir, key string) {
	_ = os.WriteFile(filepath.Join(dir, templateBootPrefix+key), []byte(bootID()), 0o600)
	homeSpares.work.After(defaultSpareDelay, func() { _ = syncTemplate(dir, key) })
}

// syncTemplate writes template key in dir to disk, every file and
// directory of it, then marks it synced.
func syncTemplate(dir, key string) error {
	err := filepath.WalkDir(filepath.Join(dir, key), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil // links: nothing to sync
		}
		return syncPath(p)
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, templateSyncedPrefix+key), nil, 0o600); err != nil {
		return err
	}
	if err := syncPath(filepath.Join(dir, templateSyncedPrefix+key)); err != nil {
		return err
	}
	return syncPath(dir)
}

// syncFile is (*os.File).Sync; tests see what is synced, in order.
var syncFile = (*os.File).Sync

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = syncFile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// templateUsable says whether template key in dir is whole for sure:
// synced, or made in this boot (the page cache holds what the disk may
// not have yet). One that is neither is removed, with its spare.
func templateUsable(dir, key string) bool {
	if _, err := os.Lstat(filepath.Join(dir, templateSyncedPrefix+key)); err == nil {
		return true
	}
	if b, err := os.ReadFile(filepath.Join(dir, templateBootPrefix+key)); err == nil && bootID() != "" && string(b) == bootID() {
		return true
	}
	for _, n := range []string{key, spareName(key), templateBootPrefix + key} {
		_ = os.RemoveAll(filepath.Join(dir, n))
	}
	return false
}
