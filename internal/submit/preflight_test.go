package submit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sandbox"
)

// countingBackend counts preflights; Start is never called here.
type countingBackend struct {
	n   int
	err error
}

func (b *countingBackend) Name() string { return "counting" }
func (b *countingBackend) Isolation() sandbox.Isolation {
	return sandbox.Isolation{Files: true, Processes: true, Network: true}
}
func (b *countingBackend) Preflight(context.Context) error {
	b.n++
	return b.err
}
func (b *countingBackend) Start(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, errors.New("not here")
}

func TestCachedPreflight(t *testing.T) {
	cache := t.TempDir()
	ctx := context.Background()
	b := &countingBackend{}
	for range 3 {
		if err := cachedPreflight(ctx, b, "counting", cache); err != nil {
			t.Fatal(err)
		}
	}
	if b.n != 1 {
		t.Fatalf("%d preflights for 3 submits in a row, want 1", b.n)
	}
	// Another backend has its own entry.
	other := &countingBackend{}
	_ = cachedPreflight(ctx, other, "other", cache)
	if other.n != 1 {
		t.Fatalf("another backend's preflight was skipped")
	}
	// A stale entry preflights again.
	path := filepath.Join(cache, "agentrun", "preflight-counting")
	old := time.Now().Add(-preflightTTL - time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	_ = cachedPreflight(ctx, b, "counting", cache)
	if b.n != 2 {
		t.Fatalf("a stale entry was trusted (%d preflights)", b.n)
	}
	// A failure is returned, never remembered, and forgets the success.
	old = time.Now().Add(-preflightTTL - time.Second)
	_ = os.Chtimes(path, old, old)
	b.err = errors.New("no namespaces")
	for range 2 {
		if err := cachedPreflight(ctx, b, "counting", cache); err == nil {
			t.Fatal("a failing preflight passed")
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the entry survived a failed preflight: %v", err)
	}
	// An entry with another key (another binary, boot or user) is not
	// trusted.
	b.err = nil
	if err := os.WriteFile(path, []byte("agentrun preflight 1\nbackend counting\nbinary /elsewhere 1 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := b.n
	_ = cachedPreflight(ctx, b, "counting", cache)
	if b.n != n+1 {
		t.Fatal("an entry for another binary was trusted")
	}
}

// The preflight's cache is in the user's cache directory of the
// submit's environment, not the process's.
func TestUserCacheDir(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	cases := []struct {
		getenv func(string) string
		want   string
	}{
		{env("HOME", "/home/u"), "/home/u/.cache"},
		{env("HOME", "/home/u", "XDG_CACHE_HOME", "/var/cache/u"), "/var/cache/u"},
		{env("HOME", "/home/u", "XDG_CACHE_HOME", "relative"), "/home/u/.cache"},
		{env(), ""},
	}
	if runtime.GOOS == "darwin" {
		cases = cases[:1]
		cases[0].want = "/home/u/Library/Caches"
	}
	for _, c := range cases {
		if got := userCacheDir(c.getenv); got != c.want {
			t.Errorf("userCacheDir = %q, want %q", got, c.want)
		}
	}
}
