package workspace

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestManifestRoundTrip(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	root := t.TempDir()
	dir, state := filepath.Join(root, "ws"), filepath.Join(root, "state")
	ws, err := NewCheckout().Create(context.Background(), repo, base, dir, state)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := NewCheckout().Open(context.Background(), dir, state)
	if err != nil {
		t.Fatal(err)
	}
	a, b := ws.(*checkoutWorkspace).m, opened.(*checkoutWorkspace).m
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("manifest differs after a round trip:\n%+v\n%+v", a, b)
	}
	if a.commit != base || len(a.entries) != 6 {
		t.Fatalf("manifest: commit %s, %d entries", a.commit, len(a.entries))
	}
	for _, e := range a.entries {
		if e.ino == 0 || e.ctime.sec == 0 || !isObjectID(e.blob) {
			t.Fatalf("entry %+v lacks stat data", e)
		}
	}
	// Damaged manifests are errors, not empty workspaces.
	for _, bad := range []string{"", "junk\n", manifestMagic + " sha1 " + base + " 1\n", manifestMagic + " sha1 " + base + " 1 2\n100644 1 2 3 4 5 6 abc no-nul"} {
		if _, err := parseManifest([]byte(bad)); err == nil {
			t.Errorf("parseManifest(%q) accepted", bad)
		}
	}
}

// The stat fast path is taken only for entries older than the manifest's
// stamp; an entry changed in the same clock tick as Create is read again.
func TestScanRacyEntriesAreRead(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, _ := newWorkspace(t, repo, base)
	m := ws.(*checkoutWorkspace).m
	var notes *entry
	for i := range m.entries {
		if m.entries[i].path == "notes.txt" {
			notes = &m.entries[i]
		}
	}
	// Pretend the content differs from what was recorded while the stat
	// data stays equal (what a same-tick write could leave).
	notes.blob = strings.Repeat("0", 40)

	m.written = stamp{1 << 40, 0} // every entry older than the stamp: trusted
	if cs := scanWS(t, ws, Limits{}); len(cs.Changes) != 0 {
		t.Fatalf("fast path not taken: %v", kinds(cs))
	}
	m.written = notes.ctime // same tick: racy, read again
	if got := kinds(scanWS(t, ws, Limits{})); got["notes.txt"] != "modify 100644" || len(got) != 1 {
		t.Fatalf("racy entry not read: %v", got)
	}
}

func TestOpenRejectsDamagedManifest(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(state, manifestName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCheckout().Open(context.Background(), dir, state); err == nil {
		t.Fatal("Open accepted a damaged manifest")
	}
}
