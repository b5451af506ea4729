package submit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/agentrun/agentrun/internal/bootid"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// A backend's preflight may start a whole throwaway sandbox (native does),
// which costs more than a small run's own work. A success is remembered
// for preflightTTL in the user's cache directory, keyed by the backend,
// the agentrun binary, the boot and the user, so that submits in a row
// preflight once. A failure is never remembered. A machine that changed
// within the window fails the run at the sandbox's Start with the same
// catalog error instead of failing the submit: never a run with less
// isolation.
const preflightTTL = 5 * time.Minute

// cachedPreflight runs b.Preflight unless a success of the same key is
// fresh in cache, the user's cache directory ("": none, it always runs).
func cachedPreflight(ctx context.Context, b sandbox.Backend, name, cache string) error {
	path, key := preflightCache(name, cache)
	if fresh(path, key, preflightTTL) {
		return nil
	}
	if err := b.Preflight(ctx); err != nil {
		if path != "" {
			_ = os.Remove(path)
		}
		return err
	}
	if path != "" {
		remember(path, key)
	}
	return nil
}

// preflightCache is the cache file for backend name in the user's cache
// directory dir and the key a fresh entry holds; "" when there is no cache
// directory or no binary to name.
func preflightCache(name, dir string) (path, key string) {
	if dir == "" {
		return "", ""
	}
	exe, err := os.Executable()
	if err != nil {
		return "", ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return "", ""
	}
	key = fmt.Sprintf("agentrun preflight 1\nbackend %s\nbinary %s %d %d\nboot %s\nuid %d\n",
		name, exe, fi.Size(), fi.ModTime().UnixNano(), bootid.ID(), os.Getuid())
	return filepath.Join(dir, "agentrun", "preflight-"+name), key
}

// preflightCacheDir is where a submit in environment getenv remembers
// its preflight ("": it does not).
func (s *Service) preflightCacheDir(getenv func(string) string) string {
	if !s.CachePreflight {
		return ""
	}
	return userCacheDir(getenv)
}

// userCacheDir is os.UserCacheDir in the environment getenv reads (the
// submit's, which may not be the process's): $XDG_CACHE_HOME (absolute),
// else ~/.cache; ~/Library/Caches on macOS. "" when there is none.
func userCacheDir(getenv func(string) string) string {
	home := getenv("HOME")
	if runtime.GOOS == "darwin" {
		if home == "" {
			return ""
		}
		return filepath.Join(home, "Library", "Caches")
	}
	if dir := getenv("XDG_CACHE_HOME"); filepath.IsAbs(dir) {
		return dir
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".cache")
}
