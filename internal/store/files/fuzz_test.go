package files_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

// FuzzResolvePrefix feeds arbitrary user input to every method that takes
// an id or a prefix. Input is either refused with ErrBadID or names a run
// directly under runs/; nothing outside runs/ is ever read, created or
// removed (the decoy beside runs/ has a valid id for a name).
func FuzzResolvePrefix(f *testing.F) {
	for _, seed := range []string{"aaa", "aaa0000001", "bbb", "../../etc", "..", "../aaaaaaaaaa",
		"aaa/../../x", "/etc/passwd", "", "a", "AAA", "aaa\x00", ".tmp-aaa", "aaaaaaaaaa", "%2e%2e",
		"aaa0000001/../../aaaaaaaaaa", "ааа", "aaa ", "zzzzzzzzzzz"} {
		f.Add(seed)
	}
	home := f.TempDir()
	s, err := files.Open(filepath.Join(home, "data"))
	if err != nil {
		f.Fatal(err)
	}
	for _, id := range []string{"aaa0000001", "aaa0000002", "bbb0000001"} {
		mustCreate(f, s, id)
	}
	decoy := filepath.Join(home, "aaaaaaaaaa") // outside the data dir
	os.MkdirAll(decoy, 0o700)
	os.WriteFile(filepath.Join(decoy, "run.json"), []byte(`{"id":"aaaaaaaaaa"}`), 0o600)
	before := listTree(f, home)

	f.Fuzz(func(t *testing.T, in string) {
		id, err := s.Resolve(ctx, in)
		switch {
		case err == nil:
			if run.ValidateID(id) != nil || !strings.HasPrefix(id, in) || filepath.Dir(s.RunDir(id)) != s.L.Runs() {
				t.Fatalf("Resolve(%q) = %q, outside runs/", in, id)
			}
		case errors.Is(err, run.ErrBadID):
			if run.ValidatePrefix(in) == nil {
				t.Fatalf("Resolve(%q) refused a valid prefix: %v", in, err)
			}
		case errors.Is(err, run.ErrNotFound), errors.Is(err, run.ErrAmbiguous):
		default:
			t.Fatalf("Resolve(%q): %v", in, err)
		}
		valid := run.ValidateID(in) == nil
		check := func(op string, err error) {
			if !valid && !errors.Is(err, run.ErrBadID) {
				t.Fatalf("%s(%q) = %v, want ErrBadID", op, in, err)
			}
		}
		_, err = s.Get(ctx, in)
		check("Get", err)
		_, err = s.Events(ctx, in, 0)
		check("Events", err)
		if !valid {
			_, err = s.Update(ctx, in, func(*run.Run) error { return nil })
			check("Update", err)
			_, err = s.AppendEvent(ctx, in, run.NewEvent(run.EventWarning, "", nil))
			check("AppendEvent", err)
			check("Delete", s.Delete(ctx, in))
			check("Create", s.Create(ctx, &run.Run{ID: in}))
		}
		if after := listTree(t, home); after != before {
			t.Fatalf("input %q changed the data directory:\nbefore %s\nafter  %s", in, before, after)
		}
	})
}

// listTree names every path under root.
func listTree(t testing.TB, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.TrimPrefix(p, root) + "\n")
		return nil
	})
	return b.String()
}
