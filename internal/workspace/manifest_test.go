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
	// The trees are written beside the manifest, for the export, which
	// reads them there (trees.go); they are not the manifest's.
	if len(a.trees) != 3 || b.trees != nil {
		t.Fatalf("trees: %d made, %d read back", len(a.trees), len(b.trees))
	}
	a.trees = nil
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

// The mapped manifest answers every lookup as the parsed one does: paths
// that sort around '/' ("a-b", "a.b", "a/b"), spaces in names, the first
// and last records, paths before and after every record.
func TestMappedManifestLookups(t *testing.T) {
	t.Parallel()
	paths := []string{"a", "a b/c d", "a-b", "a.b", "a/b", "a/b/c", "a/bc", "a0", "b", "dir/x", "dir/y/z", "z z"}
	m := &manifest{format: "sha1", commit: strings.Repeat("1", 40)}
	for i, p := range paths {
		m.entries = append(m.entries, entry{path: p, mode: modeFile, size: int64(i), blob: strings.Repeat("a", 40), ino: uint64(i + 1)})
	}
	dir := t.TempDir()
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	mm, err := mapManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	full := fullIndex{m, m.index()}
	probes := []string{"", " ", "0", "a/", "a/b/", "a/c", "c", "dir", "dir/y", "zz", "z z/"}
	probes = append(probes, paths...)
	for _, p := range paths {
		probes = append(probes, p+"/", p+"0", p[:len(p)-1])
	}
	for _, p := range probes {
		fi, fok := full.find(p)
		mi, mok := mm.find(p)
		if fok != mok || (fok && !reflect.DeepEqual(*full.at(fi), *mm.at(mi))) {
			t.Errorf("find(%q): full %v, mapped %v", p, fok, mok)
		}
		if full.trackedDir(p) != mm.trackedDir(p) {
			t.Errorf("trackedDir(%q): full %v, mapped %v", p, full.trackedDir(p), mm.trackedDir(p))
		}
		var fb, mb []string
		_ = full.below(p, func(i int) error { fb = append(fb, full.at(i).path); return nil })
		_ = mm.below(p, func(i int) error { mb = append(mb, mm.at(i).path); return nil })
		if !reflect.DeepEqual(fb, mb) {
			t.Errorf("below(%q): full %q, mapped %q", p, fb, mb)
		}
	}
	if mm.damaged() {
		t.Error("a whole manifest reads as damaged")
	}
	// A damaged record is reported, not taken for an entry.
	bad, err := newMappedManifest([]byte(manifestMagic + " sha1 " + strings.Repeat("1", 40) + " 1 2\n100644 1 2\x00"))
	if err != nil {
		t.Fatal(err)
	}
	bad.find("x")
	if !bad.damaged() {
		t.Error("a damaged record went unnoticed")
	}
}
