package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// An export that fails leaves neither the patch nor its temporary file
// (the patch is written beside the branch's move, and put in place only
// after it), and one whose record fails moves the branch back.
func TestExportFailureLeavesNoPatch(t *testing.T) {
	t.Parallel()
	repo, base := newRepo(t)
	ws, dir := newWorkspace(t, repo, base)
	writeFile(t, filepath.Join(dir, "x.txt"), "x\n", 0o644)
	cs := scanWS(t, ws, Limits{})
	ctx := context.Background()
	opts := exportOpts(t, repo, base, "agentrun/taken")
	if _, err := Export(ctx, cs, opts); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(opts.PatchPath); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "y.txt"), "y\n", 0o644)
	if _, err := Export(ctx, scanWS(t, ws, Limits{}), opts); !errors.Is(err, ErrBranchExists) {
		t.Fatalf("export onto a taken branch: %v", err)
	}
	recordErr := errors.New("no record")
	opts2 := exportOpts(t, repo, base, "agentrun/unrecorded")
	opts2.Record = func(*run.ExportResult) error { return recordErr }
	if _, err := Export(ctx, cs, opts2); !errors.Is(err, recordErr) {
		t.Fatalf("export with a failing record: %v", err)
	}
	if _, ok, _ := mustRepo(t, repo).BranchTip(ctx, "agentrun/unrecorded"); ok {
		t.Fatal("the branch of an unrecorded export stayed")
	}
	for _, p := range []string{opts.PatchPath, opts2.PatchPath} {
		ents, err := os.ReadDir(filepath.Dir(p))
		if err != nil || len(ents) != 0 {
			t.Fatalf("left beside the patch: %v %v", ents, err)
		}
	}
}

func TestImportObjects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		changes []Change
		want    int
	}{
		{[]Change{{Path: "a", Kind: "add"}}, 3},                                                              // blob, root, commit
		{[]Change{{Path: "d/e/a", Kind: "modify"}, {Path: "d/e/b", Kind: "add"}}, 6},                         // 2 blobs, d, d/e, root, commit
		{[]Change{{Path: "d/a", Kind: "delete"}, {Path: "d/f/b", Kind: "add"}, {Path: "g", Kind: "add"}}, 6}, // 2 blobs (a deletion writes none), d, d/f, root, commit
	} {
		var paths []string
		for _, ch := range c.changes {
			paths = append(paths, ch.Path)
		}
		if got := importObjects(c.changes); got != c.want {
			t.Errorf("importObjects(%s) = %d, want %d", strings.Join(paths, " "), got, c.want)
		}
	}
}

// A result's diffstat and patch name a path with letters beyond ASCII as
// it is (not as git's octal escapes), even where the repository asks git
// to quote them, and the patch still applies on the base.
func TestExportNamesPathsAsTheyAre(t *testing.T) {
	ctx := context.Background()
	repo, base := newRepo(t)
	testsupport.Git(t, repo, "config", "core.quotePath", "true")
	ws, dir := newWorkspace(t, repo, base)
	writeFile(t, filepath.Join(dir, "dir é", "new ü.txt"), "n\n", 0o644)
	opts := exportOpts(t, repo, base, "agentrun/utf8path00")
	res, err := Export(ctx, scanWS(t, ws, Limits{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Diffstat, "dir é/new ü.txt") {
		t.Fatalf("diffstat:\n%s", res.Diffstat)
	}
	patch, err := os.ReadFile(opts.PatchPath)
	if err != nil || !bytes.Contains(patch, []byte("diff --git a/dir é/new ü.txt b/dir é/new ü.txt\n")) {
		t.Fatalf("patch %q (%v)", patch, err)
	}
	patchGivesCommit(t, repo, base, opts.PatchPath, res.Commit)
}
