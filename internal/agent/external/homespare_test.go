package external

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// spareSetup makes the fake CLI's template in a new templates directory
// (a warm-up) and waits for its spare: the CLI, the templates, the
// template's key and its state.
func spareSetup(t *testing.T) (bin, tpls, key, state string) {
	t.Helper()
	dir := t.TempDir()
	bin = fakeCLI(t, dir, filepath.Join(dir, "starts.log"))
	tpls = filepath.Join(dir, "agent-homes")
	_, home, _ := warmAttempt(t, bin, tpls, nil)
	WaitSpares()
	key, err := templateKey(*fakeProfile(), run.AgentSpec{Binary: bin}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tpls, spareName(key), spareHomeDir, ".fake", "state")); err != nil {
		t.Fatalf("no spare after the warm-up: %v", err)
	}
	return bin, tpls, key, readString(t, filepath.Join(home, ".fake", "state"))
}

// freshHostHome is a new run's HOME as the supervisor makes it: its tmp.
func freshHostHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(home, homeTmp), 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

func prepared(t *testing.T, bin, tpls, home string) (ahead bool) {
	t.Helper()
	ev := prepareHome(*fakeProfile(), &run.Run{Agent: run.AgentSpec{Name: "fake", Binary: bin}}, home, tpls)
	if ev == nil || !strings.Contains(string(ev.Data), `"template"`) {
		t.Fatalf("event %+v", ev)
	}
	if _, err := os.Lstat(markPath(home)); err == nil {
		t.Fatal("the mark stayed")
	}
	return strings.Contains(ev.Message, "made ahead")
}

// A run's HOME is the spare, moved in whole; the next spare is made
// after it, and is the template again.
func TestHomeSpareTaken(t *testing.T) {
	bin, tpls, key, state := spareSetup(t)
	spare := filepath.Join(tpls, spareName(key))
	ino := inode(t, filepath.Join(spare, spareHomeDir, ".fake", "state"))
	home := freshHostHome(t)
	if !prepared(t, bin, tpls, home) {
		t.Fatal("the HOME was copied, not taken from the spare")
	}
	if readString(t, filepath.Join(home, ".fake", "state")) != state || inode(t, filepath.Join(home, ".fake", "state")) != ino {
		t.Fatal("the HOME is not the spare")
	}
	if ents, _ := os.ReadDir(filepath.Join(home, homeTmp)); len(ents) != 0 {
		t.Fatalf("tmp %v", ents)
	}
	WaitSpares()
	if got := inode(t, filepath.Join(spare, spareHomeDir, ".fake", "state")); got == ino || readString(t, filepath.Join(spare, spareHomeDir, ".fake", "state")) != state {
		t.Fatal("no new spare of the template")
	}
	templateOf(t, tpls) // and no leftovers of the taken spare
}

// Of two runs starting at once, one takes the spare and the other copies
// the template: both HOMEs are whole.
func TestHomeSpareTwoTakers(t *testing.T) {
	bin, tpls, _, state := spareSetup(t)
	homes := []string{freshHostHome(t), freshHostHome(t)}
	ahead := make([]bool, 2)
	var wg sync.WaitGroup
	for i := range homes {
		wg.Go(func() { ahead[i] = prepared(t, bin, tpls, homes[i]) })
	}
	wg.Wait()
	if ahead[0] == ahead[1] {
		t.Fatalf("taken from the spare: %v", ahead)
	}
	for _, h := range homes {
		if readString(t, filepath.Join(h, ".fake", "state")) != state {
			t.Fatalf("%s is not the template", h)
		}
	}
	WaitSpares()
}

// A spare made before the machine's last boot (its files may not have
// reached the disk) is never used: the HOME is copied from the template,
// the spare removed and made anew.
func TestHomeSpareOfAnotherBoot(t *testing.T) {
	bin, tpls, key, state := spareSetup(t)
	spare := filepath.Join(tpls, spareName(key))
	if err := os.WriteFile(filepath.Join(spare, spareBootFile), []byte("another boot"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file of the spare the crash emptied.
	if err := os.WriteFile(filepath.Join(spare, spareHomeDir, ".fake", "state"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	home := freshHostHome(t)
	if prepared(t, bin, tpls, home) {
		t.Fatal("a spare of another boot was used")
	}
	if readString(t, filepath.Join(home, ".fake", "state")) != state {
		t.Fatal("the HOME is not the template")
	}
	WaitSpares()
	if b, err := os.ReadFile(filepath.Join(spare, spareBootFile)); err != nil || string(b) != bootID() ||
		readString(t, filepath.Join(spare, spareHomeDir, ".fake", "state")) != state {
		t.Fatalf("the spare was not made anew: %q %v", b, err)
	}
}

// A HOME that has a name of the spare's already (it is not fresh: a
// supervisor checks that first, but another may write there meanwhile)
// is refused and left as it was; the spare is not used.
func TestHomeSpareRefusesANameHomeHas(t *testing.T) {
	_, tpls, key, _ := spareSetup(t)
	home := freshHostHome(t)
	if err := os.Mkdir(filepath.Join(home, ".fake"), 0o700); err != nil {
		t.Fatal(err)
	}
	if takeSpare(tpls, key, home) {
		t.Fatal("the spare was moved over a name HOME has")
	}
	ents, _ := os.ReadDir(home)
	if sub, _ := os.ReadDir(filepath.Join(home, ".fake")); len(ents) != 2 || len(sub) != 0 {
		t.Fatalf("HOME changed: %v %v", ents, sub)
	}
	WaitSpares()
}

// Where the machine's boot cannot be told, no spare is made: the template
// is copied for every run.
func TestNoHomeSpareWithoutABootID(t *testing.T) {
	old := bootID
	bootID = func() string { return "" }
	defer func() { bootID = old }()
	dir := t.TempDir()
	bin := fakeCLI(t, dir, filepath.Join(dir, "starts.log"))
	tpls := filepath.Join(dir, "agent-homes")
	warmAttempt(t, bin, tpls, nil)
	warmAttempt(t, bin, tpls, nil)
	WaitSpares()
	var names []string
	ents, _ := os.ReadDir(tpls)
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 3 || strings.HasPrefix(names[2], ".") || names[1] != templateSyncedPrefix+names[2] {
		t.Fatalf("templates %v", names)
	}
}

// What a maker or taker killed on the way left goes once it is old; not
// while another may still be at it.
func TestStaleHomeSparesRemoved(t *testing.T) {
	_, tpls, key, _ := spareSetup(t)
	fresh, stale := spareNewPrefix+key+"-1", spareTakePrefix+key+"-2"
	for _, n := range []string{fresh, stale} {
		if err := os.MkdirAll(filepath.Join(tpls, n, spareHomeDir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleSpare)
	if err := os.Chtimes(filepath.Join(tpls, stale), long, long); err != nil {
		t.Fatal(err)
	}
	if err := makeSpare(tpls, key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tpls, fresh)); err != nil {
		t.Fatal("a spare under way went")
	}
	if _, err := os.Stat(filepath.Join(tpls, stale)); err == nil {
		t.Fatal("a killed taker's leftovers stayed")
	}
}

// A template made before the machine's last boot and never synced may
// hold files the disk never got: it goes before any run starts from it,
// and the next run warms the CLI up again. A synced one stays in use.
func TestTemplateOfAnEarlierBoot(t *testing.T) {
	for _, synced := range []bool{false, true} {
		bin, tpls, key, state := spareSetup(t)
		if !synced {
			if err := os.Remove(filepath.Join(tpls, templateSyncedPrefix+key)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(tpls, templateBootPrefix+key), []byte("another boot"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, home, kinds := warmAttempt(t, bin, tpls, nil)
		WaitSpares()
		want := map[bool]string{false: "warmed", true: "template"}[synced]
		if !slices.Equal(kinds, []string{want}) {
			t.Fatalf("synced %v: home events %v, want [%s]", synced, kinds, want)
		}
		if got := readString(t, filepath.Join(home, ".fake", "state")); (got == state) != synced {
			t.Fatalf("synced %v: the run started from the old template: %v", synced, got == state)
		}
		templateOf(t, tpls)
	}
}

// Saving a template syncs it in the background (by the process's exit at
// the latest): every file and directory of it, then its mark.
func TestTemplateSynced(t *testing.T) {
	var mu sync.Mutex
	var synced []string
	old := syncFile
	syncFile = func(f *os.File) error {
		mu.Lock()
		synced = append(synced, f.Name())
		mu.Unlock()
		return old(f)
	}
	defer func() { syncFile = old }()
	_, tpls, key, _ := spareSetup(t)
	var want []string
	_ = filepath.WalkDir(filepath.Join(tpls, key), func(p string, d fs.DirEntry, err error) error {
		want = append(want, p)
		return nil
	})
	want = append(want, filepath.Join(tpls, templateSyncedPrefix+key), tpls)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %v\nwant %v", synced, want)
	}
}
