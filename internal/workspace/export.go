package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Fallback identity when neither the options nor the repository name one.
const (
	fallbackName  = "agentrun"
	fallbackEmail = "agentrun@localhost"
)

// Export writes the changes as one commit on top of opts.Base in the user's
// repository opts.Repo and points refs/heads/opts.Branch at it, then writes
// the patch to opts.PatchPath (if set) and counts the diff.
//
// The objects are written first: by Export itself, as loose objects,
// when the scan's record of the base's trees covers the changed paths
// (export_objects.go: the result is what fast-import would write), else
// by one fast-import process, which builds blobs (raw bytes: no filters),
// trees and commit from the base onto a temporary ref (handing a small
// import to unpack-objects) and answers the ids of the commit, its tree
// and the base tree. Then, at once, one diff (textconv and external diff
// off) gives numstat, diffstat and patch (written to a synced temporary
// file), and update-ref moves the branch with its old value (create-only
// unless opts.Force), dropping the temporary ref if there is one, in one
// transaction. So an export is two git processes side by side (one more
// before them when the objects are left to fast-import, one more when
// the identity comes from the configuration, one more to read the branch
// when it is to be moved or already exists). Nothing is read from or run
// in the workspace: the content comes from cs.
//
// Building the commit and the diff is all that ctx can cancel: a diff
// that fails or is cancelled moves the branch back, if update-ref moved
// it meanwhile, and the export fails. Once they are done and ctx is still
// live, the rest is not cancelled: the patch is put in place and
// opts.Record (if set) records the result; if either fails (a cancel
// that won the record, a full disk), the branch is moved back to where it
// was and the error returned. So the branch never stays at a result that
// the caller did not record.
//
// Errors: ErrNoChanges (wrapped) when cs has no changes or they leave the
// base tree as it was; ErrBranchExists when the branch exists, opts.Force is
// not set and the branch is not already this very result (same tree, same
// single parent: then Export succeeds and returns it, so a retried export
// is idempotent).
func Export(ctx context.Context, cs *ChangeSet, opts ExportOptions) (*run.ExportResult, error) {
	if err := checkExportOptions(cs, opts); err != nil {
		return nil, err
	}
	if len(cs.Changes) == 0 {
		return nil, fmt.Errorf("export: %w", ErrNoChanges)
	}
	repo := opts.Repo
	name, email := identity(ctx, opts)
	imp, tmpRef, err := writeResult(ctx, cs, name, email, opts)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if imp.tree == imp.baseTree {
		dropRef(repo, tmpRef)
		return nil, fmt.Errorf("export: the changes leave the base tree as it was: %w", ErrNoChanges)
	}
	res := &run.ExportResult{Commit: imp.commit, Branch: opts.Branch, Patch: opts.PatchPath, Refused: cs.Refused}
	diff := sync.OnceValue(startDiff(ctx, repo, opts.Base, imp.commit, opts.PatchPath, res))
	placed := false
	defer func() {
		if !placed {
			diff().discard() // the patch's temporary file
		}
	}()

	// The branch's move is not cancelled: it runs beside the diff, and the
	// branch is moved back if the diff fails or ctx ends before both are
	// done. From there on, it is recorded or moved back.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	b, err := moveBranch(uctx, repo, tmpRef, imp, opts)
	if d := diff(); d.err != nil || ctx.Err() != nil {
		// The diff's error first, as when it ran before the branch moved.
		if d.err == nil {
			d.err = ctx.Err()
		}
		if err == nil {
			err = d.err
			if uerr := b.unmove(repo); uerr != nil {
				err = fmt.Errorf("%w; and moving %s back failed: %v", d.err, opts.Branch, uerr)
			}
		} else {
			err = d.err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	res.Commit = b.commit
	unmove := func(cause error) error {
		if err := b.unmove(repo); err != nil {
			return fmt.Errorf("export: %w; and moving %s back failed: %v", cause, opts.Branch, err)
		}
		return fmt.Errorf("export: %w", cause)
	}
	if err := diff().place(); err != nil {
		return nil, unmove(err)
	}
	placed = true
	if opts.Record != nil {
		if err := opts.Record(res); err != nil {
			if opts.PatchPath != "" {
				_ = os.Remove(opts.PatchPath)
			}
			return nil, unmove(err)
		}
	}
	return res, nil
}

// movedBranch is where moveBranch left the branch: at commit, from old
// (zero: it did not exist); moved false when it was this result already.
type movedBranch struct {
	ref, commit, old, zero string
	moved                  bool
}

// unmove moves the branch back, if moveBranch moved it.
func (b movedBranch) unmove(repo string) error {
	if !b.moved {
		return nil
	}
	return moveBack(repo, b.ref, b.commit, b.old, b.zero)
}

// moveBranch points the branch at the imported commit and drops tmpRef
// in one update-ref transaction. The branch is usually new: it is created
// (create-only), and what is there read only when that fails or when it
// is to be moved (opts.Force). On error tmpRef is dropped.
func moveBranch(ctx context.Context, repo, tmpRef string, imp imported, opts ExportOptions) (movedBranch, error) {
	ref := "refs/heads/" + opts.Branch
	zero := strings.Repeat("0", len(opts.Base))
	b := movedBranch{ref: ref, commit: imp.commit, old: zero, zero: zero} // old: must not exist
	if opts.Force {
		tip, _, err := branchState(ctx, repo, ref)
		if err != nil {
			dropRef(repo, tmpRef)
			return b, err
		}
		if tip != "" {
			b.old = tip
		}
	}
	tx := fmt.Sprintf("update %s %s %s\n", ref, imp.commit, b.old)
	if tmpRef != "" {
		tx += fmt.Sprintf("delete %s %s\n", tmpRef, imp.commit)
	}
	_, err := (gitCmd{dir: repo, args: []string{"update-ref", "-m", "agentrun: export", "--stdin"}, stdin: strings.NewReader(tx)}).run(ctx)
	if err == nil {
		b.moved = true
		return b, nil
	}
	dropRef(repo, tmpRef)
	tip, same, lerr := branchState(ctx, repo, ref)
	switch {
	case lerr != nil:
		return b, fmt.Errorf("update %s: %w", ref, err)
	case tip == "" || opts.Force:
		return b, fmt.Errorf("update %s: %w", ref, err)
	case !same(imp.tree, opts.Base):
		return b, fmt.Errorf("%s at %s: %w", opts.Branch, tip, ErrBranchExists)
	}
	// This very result is already there (same tree, same parent: the
	// same diff); it is not this export's to move back.
	b.commit = tip
	return b, nil
}

// diffed is the result diff, counted into its result, with the patch in
// a synced temporary file beside patchPath.
type diffed struct {
	patchPath, tmp string
	err            error
}

// startDiff starts the result diff; the function returned waits for it.
// The counts go into res; the patch, when patchPath is set, into a synced
// temporary file that place moves into place.
func startDiff(ctx context.Context, repo, base, commit, patchPath string, res *run.ExportResult) func() diffed {
	c := make(chan diffed, 1)
	counts := *res
	go func() {
		patch, err := runDiff(ctx, repo, base, commit).counts(&counts)
		d := diffed{patchPath: patchPath, err: err}
		if err == nil && patchPath != "" {
			d.tmp, d.err = writeTemp(patchPath, patch)
		}
		c <- d
	}()
	return func() diffed {
		d := <-c
		res.FilesChanged, res.Insertions, res.Deletions, res.Diffstat = counts.FilesChanged, counts.Insertions, counts.Deletions, counts.Diffstat
		return d
	}
}

// place moves the patch into place.
func (d diffed) place() error {
	if d.tmp == "" {
		return nil
	}
	if err := os.Rename(d.tmp, d.patchPath); err != nil {
		return fmt.Errorf("write %s: %w", d.patchPath, err)
	}
	return nil
}

// discard removes the patch's temporary file if it is still there.
func (d diffed) discard() {
	if d.tmp != "" {
		_ = os.Remove(d.tmp)
	}
}

// publishTimeout bounds the uncancelled end of an export (git processes
// that take milliseconds).
const publishTimeout = 2 * time.Minute

// moveBack points ref at old again (deletes it when old is zero), only
// while it still points at commit.
func moveBack(repo, ref, commit, old, zero string) error {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	tx := fmt.Sprintf("update %s %s %s\n", ref, old, commit)
	if old == zero {
		tx = fmt.Sprintf("delete %s %s\n", ref, commit)
	}
	_, err := (gitCmd{dir: repo, args: []string{"update-ref", "-m", "agentrun: export not recorded", "--stdin"}, stdin: strings.NewReader(tx)}).run(ctx)
	return err
}

func checkExportOptions(cs *ChangeSet, opts ExportOptions) error {
	if cs == nil {
		return errors.New("export: no change set")
	}
	if opts.Repo == "" {
		return errors.New("export: no repository")
	}
	if !isObjectID(opts.Base) {
		return fmt.Errorf("export: base %q is not a full commit id", opts.Base)
	}
	if err := checkBranchName(opts.Branch); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if strings.TrimSpace(opts.Message) == "" {
		return errors.New("export: empty commit message")
	}
	// The scan validated every change; check again at the point of use.
	for _, c := range cs.Changes {
		if err := ValidatePath(c.Path); err != nil {
			return fmt.Errorf("export: %s: %w", displayPath(c.Path), err)
		}
		switch {
		case c.Kind == "delete":
		case c.Kind != "add" && c.Kind != "modify":
			return fmt.Errorf("export: %s: unknown change kind %q", c.Path, c.Kind)
		case c.Mode == modeSymlink:
			if err := ValidateSymlink(c.Path, string(c.Content)); err != nil {
				return fmt.Errorf("export: %s: %w", c.Path, err)
			}
		case c.Mode != modeFile && c.Mode != modeExec:
			return fmt.Errorf("export: %s: mode %o not allowed", c.Path, c.Mode)
		}
	}
	return nil
}

// tempRef names a ref private to one export.
func tempRef() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "refs/agentrun-tmp/export-" + hex.EncodeToString(b[:]), nil
}

// dropRef deletes the temporary ref ("": none) after a failure; best
// effort, with its own short deadline so that a cancelled export still
// cleans up.
func dropRef(repo, ref string) {
	if ref == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = git(ctx, repo, "update-ref", "-d", ref)
}

// lookup resolves each name with one cat-file process; "" for a missing one.
func lookup(ctx context.Context, repo string, names ...string) ([]string, error) {
	in := strings.Join(names, "\n") + "\n"
	out, err := gitCmd{dir: repo, args: []string{"cat-file", "--batch-check=%(objectname)"}, stdin: strings.NewReader(in)}.run(ctx)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("cat-file: %d answers for %d names", len(lines), len(names))
	}
	ids := make([]string, len(names))
	for i, l := range lines {
		if isObjectID(l) {
			ids[i] = l
		}
	}
	return ids, nil
}

// branchState reads ref's tip ("" when it does not exist), and says
// whether that tip is a result with the given tree and the single parent
// base.
func branchState(ctx context.Context, repo, ref string) (tip string, same func(tree, base string) bool, err error) {
	ids, err := lookup(ctx, repo, ref, ref+"^{tree}", ref+"^1", ref+"^2")
	if err != nil {
		return "", nil, err
	}
	return ids[0], func(tree, base string) bool { return ids[1] == tree && ids[2] == base && ids[3] == "" }, nil
}

// identity picks the author and committer: the options, else the
// repository's configuration, else agentrun.
func identity(ctx context.Context, opts ExportOptions) (string, string) {
	name, email := opts.AuthorName, opts.AuthorEmail
	if (name == "" || email == "") && !opts.IdentityRead {
		cfgName, cfgEmail := ConfigIdentity(ctx, opts.Repo)
		if name == "" {
			name = cfgName
		}
		if email == "" {
			email = cfgEmail
		}
	}
	return cleanIdent(name, fallbackName), cleanIdent(email, fallbackEmail)
}

// ConfigIdentity reads user.name and user.email from the configuration of
// the user's repository repo ("" for what is not set). A caller that knows
// the export is coming can read it early, beside other work, and pass it
// in ExportOptions.
func ConfigIdentity(ctx context.Context, repo string) (name, email string) {
	out, _ := git(ctx, repo, "config", "--get-regexp", `^user\.(name|email)$`)
	for line := range strings.SplitSeq(out, "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "user.name":
			name = v
		case "user.email":
			email = v
		}
	}
	return name, email
}

// imported are the ids of the commit written, its tree and the base's
// tree.
type imported struct{ commit, tree, baseTree string }

// writeResult writes the result's objects: itself, as loose objects, when
// the scan's record of the base allows it (export_objects.go), else with
// fast-import onto a temporary ref, which it names ("" when none).
func writeResult(ctx context.Context, cs *ChangeSet, name, email string, opts ExportOptions) (imported, string, error) {
	now := time.Now()
	who := fmt.Sprintf("%s <%s> %d %s", name, email, now.Unix(), now.Format("-0700"))
	msg := opts.Message
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	if objDir := looseObjectDir(opts.Repo); objDir != "" && cs.base != nil && cs.base.commit == opts.Base {
		objects, imp, err := buildObjects(cs.base, cs.Changes, "author "+who+"\ncommitter "+who, msg)
		if err == nil {
			if err := writeLoose(objDir, objects); err != nil {
				return imported{}, "", err
			}
			return imp, "", ctx.Err()
		}
		if !errors.Is(err, errAskGit) {
			return imported{}, "", err
		}
	}
	tmpRef, err := tempRef()
	if err != nil {
		return imported{}, "", err
	}
	imp, err := fastImport(ctx, opts.Repo, tmpRef, who, msg, cs.Changes, opts)
	if err != nil {
		dropRef(opts.Repo, tmpRef)
		return imported{}, "", err
	}
	return imp, tmpRef, nil
}

// fastImport writes the blobs, the tree and the commit (parent opts.Base)
// with one fast-import process, onto ref, and asks it for the ids of the
// commit, its tree and the base's tree. A small import is unpacked into
// loose objects (git's default, held to here): one pack per export would
// pile up in the user's repository until a gc. The pack of a small import
// is not fsynced before it is unpacked: git never syncs loose objects,
// so that sync made nothing durable, and it cost a disk flush per export.
func fastImport(ctx context.Context, repo, ref, who, msg string, changes []Change, opts ExportOptions) (imported, error) {
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 256<<10)
		fmt.Fprintf(w, "commit %s\nmark :1\nauthor %s\ncommitter %s\ndata %d\n%s\nfrom %s\n", ref, who, who, len(msg), msg, opts.Base)
		for _, c := range changes { // deletions first: a file may become a directory
			if c.Kind == "delete" {
				fmt.Fprintf(w, "D %s\n", quotePath(c.Path))
			}
		}
		for _, c := range changes {
			if c.Kind != "delete" {
				fmt.Fprintf(w, "M %o inline %s\ndata %d\n", c.Mode, quotePath(c.Path), len(c.Content))
				_, _ = w.Write(c.Content)
				_ = w.WriteByte('\n')
			}
		}
		fmt.Fprintf(w, "\nget-mark :1\nls :1 \"\"\nls %s \"\"\ndone\n", opts.Base)
		pw.CloseWithError(w.Flush())
	}()
	args := []string{"-c", "fastimport.unpackLimit=" + strconv.Itoa(importUnpackLimit), "fast-import", "--quiet", "--done"}
	if importObjects(changes) <= importUnpackLimit {
		args = append([]string{"-c", "core.fsync=none"}, args...)
	}
	out, err := gitCmd{dir: repo, args: args, stdin: pr}.run(ctx)
	_ = pr.Close()
	if err != nil {
		return imported{}, err
	}
	// "<commit>\n", then twice "040000 tree <tree>\t\n".
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	var imp imported
	if len(lines) == 3 {
		imp.commit, imp.tree, imp.baseTree = lines[0], lsTree(lines[1]), lsTree(lines[2])
	}
	if !isObjectID(imp.commit) || imp.tree == "" || imp.baseTree == "" {
		return imported{}, fmt.Errorf("fast-import: unexpected answer %q", out)
	}
	return imp, nil
}

// importUnpackLimit: an import of at most this many objects is unpacked
// into loose objects (git's default for fastimport.unpackLimit).
const importUnpackLimit = 100

// importObjects bounds the objects an import of changes writes: a blob
// per file written, a tree per directory on the changed paths and the
// root's, and the commit.
func importObjects(changes []Change) int {
	dirs := map[string]bool{}
	n := 2 // the commit and the root tree
	for _, c := range changes {
		if c.Kind != "delete" {
			n++
		}
		for p := c.Path; ; {
			i := strings.LastIndexByte(p, '/')
			if i < 0 || dirs[p[:i]] {
				break
			}
			p = p[:i]
			dirs[p] = true
		}
	}
	return n + len(dirs)
}

// lsTree is the tree id of an answer to fast-import's ls of a root.
func lsTree(line string) string {
	meta, _, _ := strings.Cut(line, "\t")
	f := strings.Fields(meta)
	if len(f) != 3 || f[1] != "tree" || !isObjectID(f[2]) {
		return ""
	}
	return f[2]
}

// quotePath quotes a validated path for fast-import (C style; validated
// paths have no backslash or control character).
func quotePath(p string) string {
	return `"` + strings.ReplaceAll(p, `"`, `\"`) + `"`
}

// diffArgs are the flags of the result diff: no textconv, no external diff,
// no colour, rename detection, fixed prefixes (whatever diff.noprefix or
// diff.mnemonicPrefix say), submodules as commit ids.
var diffArgs = []string{
	"--no-textconv", "--no-ext-diff", "--no-color", "-M", "--submodule=short", "--ignore-submodules=none",
	"--src-prefix=a/", "--dst-prefix=b/",
}

// diffOut is the output of the result diff, or its error.
type diffOut struct {
	out []byte
	err error
}

// runDiff runs one diff for numstat, diffstat and the binary-safe patch.
// Paths are written as they are, UTF-8 and all, not as octal escapes,
// whatever the user's core.quotePath says: the diffstat is read by people
// (git still quotes a path with a quote, a backslash or a control
// character, and git apply reads either form).
func runDiff(ctx context.Context, repo, base, commit string) diffOut {
	args := append([]string{"-c", "core.quotePath=false", "diff"}, diffArgs...)
	args = append(args, "--numstat", "-z", "--stat=100", "--binary", "-p", base, commit, "--")
	out, err := gitCmd{dir: repo, args: args}.run(ctx)
	return diffOut{out, err}
}

// counts fills the counts of res and returns the patch.
func (d diffOut) counts(res *run.ExportResult) (patch []byte, err error) {
	if d.err != nil {
		return nil, d.err
	}
	numstat, stat, patch, err := splitDiff(d.out)
	if err != nil {
		return nil, err
	}
	if res.FilesChanged, res.Insertions, res.Deletions, err = parseNumstat(numstat); err != nil {
		return nil, err
	}
	res.Diffstat = string(stat)
	return patch, nil
}

// splitDiff cuts the output of `diff --numstat -z --stat -p` into its three
// parts: numstat records (each starts with a digit or '-'), the diffstat
// (starts with a space, ends at a NUL) and the patch.
func splitDiff(out []byte) (numstat, stat, patch []byte, err error) {
	i := 0
	for i < len(out) && out[i] != ' ' {
		// one record: "add\tdel\tpath\0" or "add\tdel\t\0from\0to\0"
		j := bytes.IndexByte(out[i:], 0)
		if j < 0 {
			return nil, nil, nil, errors.New("diff: truncated numstat")
		}
		rec := out[i : i+j]
		i += j + 1
		if bytes.HasSuffix(rec, []byte{'\t'}) {
			for range 2 {
				k := bytes.IndexByte(out[i:], 0)
				if k < 0 {
					return nil, nil, nil, errors.New("diff: truncated rename")
				}
				i += k + 1
			}
		}
	}
	numstat = out[:i]
	rest := out[i:]
	k := bytes.IndexByte(rest, 0)
	if k < 0 {
		return numstat, rest, nil, nil
	}
	return numstat, rest[:k], rest[k+1:], nil
}

// cleanIdent drops what git would refuse in an identity.
func cleanIdent(s, fallback string) string {
	s = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if s = strings.TrimSpace(s); s == "" {
		return fallback
	}
	return s
}

// parseNumstat reads `git diff --numstat -z`: "add\tdel\tpath\0", or for a
// rename "add\tdel\t\0from\0to\0"; binary files count "-".
func parseNumstat(out []byte) (files, ins, del int, err error) {
	for len(out) > 0 {
		rec, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return 0, 0, 0, fmt.Errorf("numstat: truncated output")
		}
		out = rest
		f := bytes.SplitN(rec, []byte{'\t'}, 3)
		if len(f) != 3 {
			return 0, 0, 0, fmt.Errorf("numstat: unexpected record %q", rec)
		}
		if len(f[2]) == 0 { // rename: two more NUL-terminated paths
			for range 2 {
				if _, rest, ok = bytes.Cut(out, []byte{0}); !ok {
					return 0, 0, 0, fmt.Errorf("numstat: truncated rename")
				}
				out = rest
			}
		}
		files++
		if a, err := strconv.Atoi(string(f[0])); err == nil {
			ins += a
		}
		if d, err := strconv.Atoi(string(f[1])); err == nil {
			del += d
		}
	}
	return files, ins, del, nil
}

// writeTemp writes data to a synced temporary file (mode 0644) beside
// path, for a rename to path, and returns its name.
func writeTemp(path string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("write %s: %w", path, werr)
	}
	return tmp, nil
}
