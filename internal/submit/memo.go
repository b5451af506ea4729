package submit

import (
	"os"
	"path/filepath"
	"time"
)

// Memos in the user's cache directory: a file whose content is the entry
// it stands for, fresh for a while after it was written (a backend's
// preflight, a model server's answer on a model and key).

// fresh says that the memo at path holds entry and is younger than ttl.
func fresh(path, entry string, ttl time.Duration) bool {
	if path == "" {
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	age := time.Since(fi.ModTime())
	data, err := os.ReadFile(path)
	return err == nil && string(data) == entry && age >= 0 && age < ttl
}

// remember writes a memo's entry atomically; best effort.
func remember(path, key string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".memo-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(key)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
	}
}
