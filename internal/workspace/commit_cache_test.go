package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// forgetCommits empties the process's own commit memos, as a new process
// starts.
func forgetCommits() {
	fileMemo.mu.Lock()
	fileMemo.m = nil
	fileMemo.mu.Unlock()
	checkoutMemo.mu.Lock()
	checkoutMemo.m = nil
	checkoutMemo.mu.Unlock()
}

// TestCommitCacheKeepsAnswers: a commit's file (present or not) and the
// size of its checkout, once kept, are answered from the cache without the
// repository (a new process, the repository gone); nothing is written
// before Keep; an answer that cannot be read is asked of git again.
func TestCommitCacheKeepsAnswers(t *testing.T) {
	ctx := context.Background()
	repo, base := testsupport.Repo(t, map[string]string{".agentrun.toml": "setup = \"make\"\n", "a.txt": "a\n"})
	dir := filepath.Join(t.TempDir(), "commits")
	t.Cleanup(forgetCommits)
	forgetCommits()

	c := NewCommitCache(dir)
	data, ok, err := c.FileAt(ctx, repo, base, ".agentrun.toml")
	if err != nil || !ok || string(data) != "setup = \"make\"\n" {
		t.Fatalf("FileAt = %q %v %v", data, ok, err)
	}
	if _, ok, err := c.FileAt(ctx, repo, base, "missing.toml"); err != nil || ok {
		t.Fatalf("FileAt(missing) = %v %v", ok, err)
	}
	want, err := c.CheckoutBytes(ctx, repo, base)
	if err != nil || want <= 0 {
		t.Fatalf("CheckoutBytes = %d %v", want, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the cache was written before Keep: %v", err)
	}
	c.Keep()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 3 {
		t.Fatalf("kept %d answers (%v), want 3", len(ents), err)
	}

	// A new process, the repository gone: the cache answers alone.
	forgetCommits()
	gone := filepath.Join(t.TempDir(), "gone")
	c = NewCommitCache(dir)
	if data, ok, err := c.FileAt(ctx, gone, base, ".agentrun.toml"); err != nil || !ok || string(data) != "setup = \"make\"\n" {
		t.Errorf("kept FileAt = %q %v %v", data, ok, err)
	}
	if _, ok, err := c.FileAt(ctx, gone, base, "missing.toml"); err != nil || ok {
		t.Errorf("kept FileAt(missing) = %v %v", ok, err)
	}
	if n, err := c.CheckoutBytes(ctx, gone, base); err != nil || n != want {
		t.Errorf("kept CheckoutBytes = %d %v, want %d", n, err, want)
	}

	// An answer that does not read (torn by a crash) is git's again.
	if err := os.WriteFile(filepath.Join(dir, base+"-checkout"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	forgetCommits()
	if _, err := c.CheckoutBytes(ctx, gone, base); err == nil {
		t.Error("a torn answer was taken: CheckoutBytes of a gone repository did not fail")
	}
	if n, err := c.CheckoutBytes(ctx, repo, base); err != nil || n != want {
		t.Errorf("CheckoutBytes after a torn answer = %d %v, want %d", n, err, want)
	}

	// A nil cache asks git.
	var none *CommitCache
	if _, ok, err := none.FileAt(ctx, repo, base, "a.txt"); err != nil || !ok {
		t.Errorf("nil cache FileAt = %v %v", ok, err)
	}
	none.Keep()
}

// TestCommitCachePrunes: past commitCacheEntries answers, a Keep removes
// the older half.
func TestCommitCachePrunes(t *testing.T) {
	dir := t.TempDir()
	for i := range commitCacheEntries {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)+"-checkout"), []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCommitCache(dir)
	c.learn("new-checkout", []byte("2"))
	c.Keep()
	ents, _ := os.ReadDir(dir)
	if n := len(ents); n > commitCacheEntries/2+1 || n < commitCacheEntries/2 {
		t.Errorf("%d answers left of %d, want about half", n, commitCacheEntries+1)
	}
}
