package workspace

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// exportCase is a change an agent makes to newRepo's tree.
type exportCase struct {
	name string
	edit func(t *testing.T, dir string)
	// writes says the edit only writes files: it is made in an overlay's
	// upper layer as it is (a deletion there is a whiteout, which only
	// the kernel or root makes).
	writes bool
}

var exportCases = []exportCase{
	{"modify deep", func(t *testing.T, dir string) {
		writeFile(t, filepath.Join(dir, "src", "main.go"), "package main\n\n// changed\n", 0o644)
	}, true},
	{"add in new directories", func(t *testing.T, dir string) {
		writeFile(t, filepath.Join(dir, "a", "b", "c", "new.txt"), "new\n", 0o644)
	}, true},
	{"delete one", func(t *testing.T, dir string) { rm(t, filepath.Join(dir, "notes.txt")) }, false},
	{"delete a whole directory", func(t *testing.T, dir string) {
		rm(t, filepath.Join(dir, "src", "main.go"))
		rm(t, filepath.Join(dir, "src", "util.go"))
		rm(t, filepath.Join(dir, "src"))
	}, false},
	{"file becomes directory", func(t *testing.T, dir string) {
		rm(t, filepath.Join(dir, "notes.txt"))
		writeFile(t, filepath.Join(dir, "notes.txt", "inside"), "x\n", 0o644)
	}, false},
	{"directory becomes file", func(t *testing.T, dir string) {
		if err := os.RemoveAll(filepath.Join(dir, "src")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "src"), "now a file\n", 0o644)
	}, false},
	{"symlinks and modes", func(t *testing.T, dir string) {
		rm(t, filepath.Join(dir, "readme-link"))
		if err := os.Symlink("src/main.go", filepath.Join(dir, "readme-link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../README.md", filepath.Join(dir, "src", "up")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "scripts", "run.sh"), 0o644); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "src", "tool"), "#!/bin/sh\n", 0o755)
	}, false},
	{"names around the separator", func(t *testing.T, dir string) {
		for _, n := range []string{"src.txt", "src-x", "src0", "src/a b", "src/ü", "s", "srd/x", "src/util.go/../x"} {
			if !strings.Contains(n, "..") {
				writeFile(t, filepath.Join(dir, n), n+"\n", 0o644)
			}
		}
	}, true},
	{"everything deleted", func(t *testing.T, dir string) {
		for _, n := range []string{"README.md", "notes.txt", "readme-link", "scripts", "src"} {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, filepath.Join(dir, "only"), "one\n", 0o644)
	}, false},
}

func rm(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// TestExportObjectsMatchFastImport: for every kind of change, on both
// object formats and for the plain checkout, the copy of a cached layer
// and (where the change only writes files) an overlay's upper layer,
// the objects the export writes itself are the ones fast-import writes
// from the same change set: the same commit id (so the same tree and
// every blob), and git's fsck accepts them.
func TestExportObjectsMatchFastImport(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"sha1", "sha256"} {
		for _, c := range exportCases {
			t.Run(format+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				repo, base := newRepo(t, "--object-format="+format)
				cache := NewLayerCache(filepath.Join(t.TempDir(), "layers"))
				defer cache.Wait()
				providers := []Provider{NewCheckout(), NewLayerCopy(cache)}
				if c.writes {
					providers = append(providers, NewOverlay(cache))
				}
				for _, p := range providers {
					root := t.TempDir()
					ws, err := p.Create(context.Background(), repo, base, filepath.Join(root, "ws"), filepath.Join(root, "state"))
					if err != nil {
						t.Fatal(err)
					}
					if o, ok := p.(*overlayProvider); ok {
						o.cache.Wait()
					}
					c.edit(t, ws.Dir())
					cs := scanWS(t, ws, Limits{})
					who, msg := "author A <a@example.com> 1700000000 +0100\ncommitter A <a@example.com> 1700000000 +0100", "result\n\nbody\n"
					objects, mine, err := buildObjects(cs.base, cs.Changes, who, msg)
					if err != nil {
						t.Fatalf("%T: %v", p, err)
					}
					if err := writeLoose(looseObjectDir(repo), objects); err != nil {
						t.Fatal(err)
					}
					theirs, err := fastImport(context.Background(), repo, "refs/agentrun-tmp/test", "A <a@example.com> 1700000000 +0100", msg, cs.Changes, ExportOptions{Base: base})
					if err != nil {
						t.Fatal(err)
					}
					if mine != theirs {
						t.Fatalf("%T: wrote %+v, fast-import %+v", p, mine, theirs)
					}
					testsupport.Git(t, repo, "update-ref", "refs/heads/mine", mine.commit)
					testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
				}
			})
		}
	}
}

// TestExportAsksGitWithoutUsableTrees: a base tree that the index
// cannot rebuild (a legacy mode, which the index canonicalizes), a trees
// file missing, damaged or of another commit, and a repository layout or
// configuration the export does not write into: the export goes through
// fast-import, and the result is still right.
func TestExportAsksGitWithoutUsableTrees(t *testing.T) {
	t.Parallel()
	t.Run("legacy mode", func(t *testing.T) {
		t.Parallel()
		repo, base := newRepo(t)
		// The base's root holds a 100664 file, which mktree would
		// canonicalize: written as it is.
		blob := testsupport.Git(t, repo, "hash-object", "-w", "README.md")
		var tree bytes.Buffer
		for _, l := range strings.Split(testsupport.Git(t, repo, "ls-tree", base), "\n") {
			meta, name, _ := strings.Cut(l, "\t")
			f := strings.Fields(meta)
			raw, _ := hex.DecodeString(f[2])
			if name == "notes.txt" { // sorts between README.md ... and readme-link
				mode := "100664"
				raw, _ = hex.DecodeString(blob)
				tree.WriteString(mode + " " + name + "\x00")
				tree.Write(raw)
				continue
			}
			mode := strings.TrimPrefix(f[0], "0")
			tree.WriteString(mode + " " + name + "\x00")
			tree.Write(raw)
		}
		cmd := testsupport.GitCmd(t, repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin")
		cmd.Stdin = &tree
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		legacy := testsupport.Git(t, repo, "commit-tree", "-p", base, "-m", "legacy", strings.TrimSpace(string(out)))
		ws, dir := newWorkspace(t, repo, legacy)
		writeFile(t, filepath.Join(dir, "new.txt"), "x\n", 0o644)        // the root: not rebuilt
		writeFile(t, filepath.Join(dir, "src", "main.go"), "y\n", 0o644) // src: rebuilt
		cs := scanWS(t, ws, Limits{})
		if _, _, err := buildObjects(cs.base, cs.Changes, "author A <a> 1 +0000\ncommitter A <a> 1 +0000", "m\n"); !errors.Is(err, errAskGit) {
			t.Fatalf("buildObjects on a legacy root: %v, want errAskGit", err)
		}
		exportAsksGit(t, cs, repo, legacy, "src/main.go")
	})
	damage := map[string]func(t *testing.T, state string){
		"missing": func(t *testing.T, state string) { rm(t, filepath.Join(state, treesName)) },
		"torn": func(t *testing.T, state string) {
			p := filepath.Join(state, treesName)
			fi, _ := os.Stat(p)
			if err := os.Truncate(p, fi.Size()-9); err != nil {
				t.Fatal(err)
			}
		},
		"a byte changed": func(t *testing.T, state string) {
			p := filepath.Join(state, treesName)
			b, _ := os.ReadFile(p)
			b[len(b)-3] ^= 0x20 // in the last tree's content
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"another commit": func(t *testing.T, state string) {
			p := filepath.Join(state, treesName)
			b, _ := os.ReadFile(p)
			head, rest, _ := bytes.Cut(b, []byte("\n"))
			f := strings.Fields(string(head))
			f[3] = strings.Repeat("1", len(f[3]))
			if err := os.WriteFile(p, append([]byte(strings.Join(f, " ")+"\n"), rest...), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, base := newRepo(t)
			root := t.TempDir()
			state := filepath.Join(root, "state")
			ws, err := NewCheckout().Create(context.Background(), repo, base, filepath.Join(root, "ws"), state)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(ws.Dir(), "src", "util.go"), "changed\n", 0o644)
			fn(t, state)
			cs := scanWS(t, ws, Limits{})
			if _, _, err := buildObjects(cs.base, cs.Changes, "author A <a> 1 +0000\ncommitter A <a> 1 +0000", "m\n"); !errors.Is(err, errAskGit) {
				t.Fatalf("buildObjects: %v, want errAskGit", err)
			}
			exportAsksGit(t, cs, repo, base, "src/util.go")
		})
	}
	t.Run("shared repository", func(t *testing.T) {
		t.Parallel()
		repo, base := newRepo(t)
		testsupport.Git(t, repo, "config", "core.sharedRepository", "group")
		ws, dir := newWorkspace(t, repo, base)
		writeFile(t, filepath.Join(dir, "src", "util.go"), "changed\n", 0o644)
		if d := looseObjectDir(repo); d != "" {
			t.Fatalf("looseObjectDir of a shared repository = %q", d)
		}
		exportAsksGit(t, scanWS(t, ws, Limits{}), repo, base, "src/util.go")
	})
}

// exportAsksGit exports cs and checks it went through fast-import (its
// temporary ref) and that the result holds the changed file changed.
func exportAsksGit(t *testing.T, cs *ChangeSet, repo, base, changed string) {
	t.Helper()
	opts := ExportOptions{Repo: repo, Base: base, Branch: "agentrun/asks-git", Message: "m\n", AuthorName: "A", AuthorEmail: "a@example.com"}
	_, tmpRef, err := writeResult(context.Background(), cs, "A", "a@example.com", opts)
	if err != nil || tmpRef == "" {
		t.Fatalf("writeResult: ref %q, %v; want fast-import's temporary ref", tmpRef, err)
	}
	dropRef(repo, tmpRef)
	res, err := Export(context.Background(), cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testsupport.Git(t, repo, "rev-parse", res.Commit+":"+changed), testsupport.Git(t, repo, "rev-parse", base+":"+changed); got == want {
		t.Fatalf("the result's %s is the base's", changed)
	}
	if out, err := exec.Command("git", "-C", repo, "for-each-ref", "refs/agentrun-tmp/").Output(); err != nil || len(out) != 0 {
		t.Fatalf("temporary refs left: %q %v", out, err)
	}
}

// TestExportWritesObjectsItself: a plain export of a workspace from this
// version writes its objects itself (no temporary ref, no fast-import),
// into a repository and into a linked worktree's common directory.
func TestExportWritesObjectsItself(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	wt := filepath.Join(t.TempDir(), "linked")
	testsupport.Git(t, repo, "worktree", "add", "-q", "--detach", wt, base)
	// A bare repository (an agent host's cache of a project).
	bare := filepath.Join(t.TempDir(), "project.git")
	testsupport.Git(t, repo, "clone", "-q", "--bare", repo, bare)
	for _, r := range []string{repo, wt, bare} {
		want := filepath.Join(repo, ".git", "objects")
		if r == bare {
			want = filepath.Join(bare, "objects")
		}
		if d := looseObjectDir(r); d != want {
			t.Fatalf("looseObjectDir(%s) = %q, want %q", r, d, want)
		}
		ws, dir := newWorkspace(t, r, base)
		writeFile(t, filepath.Join(dir, "src", "util.go"), "changed in "+r+"\n", 0o644)
		cs := scanWS(t, ws, Limits{})
		opts := ExportOptions{Repo: r, Base: base, Branch: "agentrun/itself-" + filepath.Base(r), Message: "m\n", AuthorName: "A", AuthorEmail: "a@example.com"}
		imp, tmpRef, err := writeResult(context.Background(), cs, "A", "a@example.com", opts)
		if err != nil || tmpRef != "" {
			t.Fatalf("writeResult in %s: ref %q, %v", r, tmpRef, err)
		}
		if got := testsupport.Git(t, r, "cat-file", "-t", imp.commit); got != "commit" {
			t.Fatalf("%s: %s is a %q", r, imp.commit, got)
		}
		res, err := Export(context.Background(), cs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := testsupport.Git(t, r, "show", res.Commit+":src/util.go"); got != "changed in "+r {
			t.Fatalf("%s: result holds %q", r, got)
		}
	}
	testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
	testsupport.Git(t, bare, "fsck", "--strict", "--no-dangling")
}

// TestLooseObjectDirReadsIncludes: a configuration that asks for shared
// permissions or fsync, in the repository's file, in a global file or in
// a file either includes, sends the export to git; a plain include does
// not.
func TestLooseObjectDirReadsIncludes(t *testing.T) {
	repo, _ := newRepo(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	global := filepath.Join(home, ".gitconfig")
	writeFile(t, global, "[user]\n\tname = A\n[include]\n\tpath = ~/.gitconfig.local\n[includeIf \"gitdir:~/work/\"]\n\tpath = work.inc\n", 0o644)
	if looseObjectDir(repo) == "" {
		t.Fatal("a plain include sent the export to git")
	}
	for _, c := range []struct{ file, text string }{
		{filepath.Join(home, ".gitconfig.local"), "[core]\n\tfsync = loose-object\n"},
		{filepath.Join(home, "work.inc"), "[core]\n\tsharedRepository = group\n"},
		{filepath.Join(repo, ".git", "config"), "[core]\n\tfsyncObjectFiles = true\n"},
	} {
		old, _ := os.ReadFile(c.file)
		writeFile(t, c.file, string(old)+c.text, 0o644)
		if d := looseObjectDir(repo); d != "" {
			t.Errorf("with %q in %s: %q, want git", c.text, c.file, d)
		}
		writeFile(t, c.file, string(old), 0o644)
	}
	if looseObjectDir(repo) == "" {
		t.Fatal("the configuration put back still sends the export to git")
	}
}

// TestWriteLooseFreshens: an object the export would write that the
// repository holds already, unreachable and old (a result that was
// dropped), is freshened as git does, so that a `git prune --expire` at
// the same time keeps it for the branch about to name it; a new object
// is written whole.
func TestWriteLooseFreshens(t *testing.T) {
	t.Parallel()
	repo := filepath.Join(t.TempDir(), "cache.git")
	testsupport.Git(t, t.TempDir(), "init", "-q", "--bare", repo)
	objDir := filepath.Join(repo, "objects")
	old := testsupport.GitInput(t, repo, "dropped result\n", "hash-object", "-w", "--stdin")
	path := filepath.Join(objDir, old[:2], old[2:])
	then := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(path, then, then); err != nil {
		t.Fatal(err)
	}
	fresh := "new result\n"
	newID := testsupport.GitInput(t, repo, fresh, "hash-object", "--stdin") // its id, not written
	if err := writeLoose(objDir, []object{{id: old, kind: "blob", data: []byte("dropped result\n")}, {id: newID, kind: "blob", data: []byte(fresh)}}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("the object already there is still from %s", fi.ModTime())
	}
	testsupport.Git(t, repo, "prune", "--expire=1.hour.ago")
	for _, id := range []string{old, newID} {
		if got := testsupport.Git(t, repo, "cat-file", "-t", id); got != "blob" {
			t.Errorf("%s is a %q after prune", id, got)
		}
	}
}

// TestWriteLooseStoredOrCompressed: objects up to storedMax are written
// uncompressed (stored blocks), larger ones compressed; git reads both
// back byte for byte and fsck accepts them.
func TestWriteLooseStoredOrCompressed(t *testing.T) {
	t.Parallel()
	repo := filepath.Join(t.TempDir(), "r.git")
	testsupport.Git(t, t.TempDir(), "init", "-q", "--bare", repo)
	objDir := filepath.Join(repo, "objects")
	rnd := make([]byte, 100<<10)
	for i := range rnd {
		rnd[i] = byte(i*7919 + i>>5)
	}
	sizes := []int{0, 1, 100, storedMax - 20, storedMax, 90 << 10}
	var objects []object
	for _, n := range sizes {
		data := bytes.Repeat([]byte("text line\n"), n/10+1)[:n]
		if n == storedMax-20 {
			data = rnd[:n] // stored: its size does not depend on its content
		}
		id := testsupport.GitInput(t, repo, string(data), "hash-object", "--stdin")
		objects = append(objects, object{id: id, kind: "blob", data: data})
	}
	if err := writeLoose(objDir, objects); err != nil {
		t.Fatal(err)
	}
	for i, o := range objects {
		fi, err := os.Stat(filepath.Join(objDir, o.id[:2], o.id[2:]))
		if err != nil {
			t.Fatal(err)
		}
		raw := len("blob ") + len(strconv.Itoa(len(o.data))) + 1 + len(o.data)
		stored := raw <= storedMax
		if stored && fi.Size() != int64(raw+2+5+4) {
			t.Errorf("object of %d bytes: %d bytes on disk, want %d (stored)", sizes[i], fi.Size(), raw+11)
		}
		if !stored && fi.Size() >= int64(raw)/4 {
			t.Errorf("object of %d bytes: %d bytes on disk, want it compressed", sizes[i], fi.Size())
		}
		if got := testsupport.Git(t, repo, "cat-file", "-s", o.id); got != strconv.Itoa(len(o.data)) {
			t.Errorf("git reads object of %d bytes as %s bytes", sizes[i], got)
		}
	}
	testsupport.Git(t, repo, "fsck", "--strict", "--no-dangling")
}

// TestStoredZlib: a stream of stored blocks, one or several, reads back
// as what was written, with its checksum.
func TestStoredZlib(t *testing.T) {
	for _, n := range []int{0, 1, 0xffff, 0xffff + 1, 3*0xffff + 17} {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(i * 31)
		}
		zr, err := zlib.NewReader(bytes.NewReader(storedZlib(raw)))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%d bytes: read %d bytes back, %v", n, len(got), err)
		}
	}
}
