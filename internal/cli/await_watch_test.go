package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRunWatchWakes: the watch on a run's directory fires when its record
// is renamed into place and when its journal grows, as the files store
// writes them, and not while nothing changes.
func TestRunWatchWakes(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w := watchRun(dir)
	if w == nil {
		t.Fatal("no watch on a directory")
	}
	defer w.Close()
	quiet := func() {
		t.Helper()
		select {
		case <-w.C():
			t.Fatal("woken with nothing changed")
		case <-time.After(100 * time.Millisecond):
		}
	}
	woken := func(what string) {
		t.Helper()
		select {
		case <-w.C():
		case <-time.After(5 * time.Second):
			t.Fatalf("not woken by %s", what)
		}
		// What one change queued is drained: the next wait is quiet.
		time.Sleep(20 * time.Millisecond)
		select {
		case <-w.C():
		default:
		}
	}
	quiet()
	tmp := filepath.Join(dir, ".run.json.tmp-1")
	if err := os.WriteFile(tmp, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "run.json")); err != nil {
		t.Fatal(err)
	}
	woken("the record renamed into place")
	quiet()
	f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("{}\n"); err != nil {
		t.Fatal(err)
	}
	woken("the journal appended to")

	var none *runWatch
	if none.C() != nil || none.poll(0) != awaitPoll(0) || w.poll(0) != watchedPoll {
		t.Error("a nil watch polls as awaitPoll says; a watch at least every watchedPoll")
	}
	none.Close()
}
