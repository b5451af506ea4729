package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
// Everything runs in the user's repository with git plumbing: fast-import
// for the blobs (raw bytes, no filters), a temporary index for the tree,
// commit-tree, update-ref with the old value (create-only unless
// opts.Force), diff with textconv and external diff off. Nothing is read
// from or run in the workspace: the content comes from cs.
//
// Errors: ErrNoChanges (wrapped) when cs has no changes or they leave the
// base tree as it was; ErrBranchExists when the branch exists, opts.Force is
// not set and the branch is not already this very result (same tree, same
// parent: then Export succeeds and returns it, so a retried export is
// idempotent).
func Export(ctx context.Context, cs *ChangeSet, opts ExportOptions) (*run.ExportResult, error) {
	if err := checkExportOptions(cs, opts); err != nil {
		return nil, err
	}
	if len(cs.Changes) == 0 {
		return nil, fmt.Errorf("export: %w", ErrNoChanges)
	}
	repo := opts.Repo
	ref := "refs/heads/" + opts.Branch
	baseTree, err := git(ctx, repo, "rev-parse", "--verify", "-q", opts.Base+"^{tree}")
	if err != nil {
		return nil, fmt.Errorf("export: base %s: %w", opts.Base, err)
	}
	tree, err := buildTree(ctx, repo, opts.Base, cs.Changes)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if tree == baseTree {
		return nil, fmt.Errorf("export: the changes leave the base tree as it was: %w", ErrNoChanges)
	}
	tip, exists, err := (&Repo{path: repo}).refTip(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	var commit string
	if exists && !opts.Force {
		same, err := sameResult(ctx, repo, tip, tree, opts.Base)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		if !same {
			return nil, fmt.Errorf("export: %s at %s: %w", opts.Branch, tip, ErrBranchExists)
		}
		commit = tip
	} else {
		if commit, err = commitTree(ctx, repo, tree, opts); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		old := strings.Repeat("0", len(opts.Base)) // must not exist
		if exists {
			old = tip
		}
		if _, err := git(ctx, repo, "update-ref", "-m", "agentrun: export", ref, commit, old); err != nil {
			if _, now, _ := (&Repo{path: repo}).refTip(ctx, ref); now && !exists {
				return nil, fmt.Errorf("export: %s: %w", opts.Branch, ErrBranchExists)
			}
			return nil, fmt.Errorf("export: update %s: %w", ref, err)
		}
	}
	res := &run.ExportResult{Commit: commit, Branch: opts.Branch, Patch: opts.PatchPath, Refused: cs.Refused}
	if opts.PatchPath != "" {
		if err := writePatch(ctx, repo, opts.Base, commit, opts.PatchPath); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	if err := diffStats(ctx, repo, opts.Base, commit, res); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return res, nil
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

// buildTree writes the blobs and returns the tree of base with the
// changes applied, built in a temporary index outside the repository.
func buildTree(ctx context.Context, repo, base string, changes []Change) (string, error) {
	tmp, err := os.MkdirTemp("", "agentrun-export-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	blobs, err := writeBlobs(ctx, repo, tmp, changes)
	if err != nil {
		return "", err
	}
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if _, err := (gitCmd{dir: repo, args: []string{"read-tree", base}, env: env}).run(ctx); err != nil {
		return "", err
	}
	var info bytes.Buffer
	zero := strings.Repeat("0", len(base))
	for _, c := range changes { // deletions first: a file may become a directory
		if c.Kind == "delete" {
			fmt.Fprintf(&info, "0 %s\t%s\x00", zero, c.Path)
		}
	}
	for i, c := range changes {
		if c.Kind != "delete" {
			fmt.Fprintf(&info, "%o %s\t%s\x00", c.Mode, blobs[i], c.Path)
		}
	}
	if _, err := (gitCmd{dir: repo, args: []string{"update-index", "--add", "--remove", "--replace", "-z", "--index-info"}, env: env, stdin: &info}).run(ctx); err != nil {
		return "", err
	}
	out, err := (gitCmd{dir: repo, args: []string{"write-tree"}, env: env}).run(ctx)
	if err != nil {
		return "", err
	}
	tree := strings.TrimSpace(string(out))
	if !isObjectID(tree) {
		return "", fmt.Errorf("write-tree: unexpected output %q", tree)
	}
	return tree, nil
}

// writeBlobs stores the content of every non-delete change with one
// fast-import process (raw bytes, no filters) and returns the blob ids by
// change index.
func writeBlobs(ctx context.Context, repo, tmp string, changes []Change) ([]string, error) {
	marks := filepath.Join(tmp, "marks")
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 256<<10)
		for i, c := range changes {
			if c.Kind == "delete" {
				continue
			}
			fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", i+1, len(c.Content))
			_, _ = w.Write(c.Content)
			_ = w.WriteByte('\n')
		}
		_, _ = w.WriteString("done\n")
		pw.CloseWithError(w.Flush())
	}()
	_, err := gitCmd{dir: repo, args: []string{"fast-import", "--quiet", "--done", "--export-marks=" + marks}, stdin: pr}.run(ctx)
	_ = pr.Close()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(marks)
	if err != nil {
		return nil, fmt.Errorf("fast-import marks: %w", err)
	}
	blobs := make([]string, len(changes))
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		mark, id, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(strings.TrimPrefix(mark, ":"))
		if !ok || err != nil || n < 1 || n > len(changes) || !isObjectID(id) {
			return nil, fmt.Errorf("fast-import marks: unexpected line %q", line)
		}
		blobs[n-1] = id
	}
	for i, c := range changes {
		if c.Kind != "delete" && blobs[i] == "" {
			return nil, fmt.Errorf("fast-import marks: no blob for %s", c.Path)
		}
	}
	return blobs, nil
}

// sameResult reports whether commit has exactly tree and the single parent
// base: the branch already holds this result.
func sameResult(ctx context.Context, repo, commit, tree, base string) (bool, error) {
	out, err := git(ctx, repo, "cat-file", "commit", commit)
	if err != nil {
		return false, err
	}
	head, _, _ := strings.Cut(out, "\n\n")
	var gotTree string
	var parents []string
	for line := range strings.SplitSeq(head, "\n") {
		if t, ok := strings.CutPrefix(line, "tree "); ok {
			gotTree = t
		}
		if p, ok := strings.CutPrefix(line, "parent "); ok {
			parents = append(parents, p)
		}
	}
	return gotTree == tree && len(parents) == 1 && parents[0] == base, nil
}

// commitTree makes the result commit.
func commitTree(ctx context.Context, repo, tree string, opts ExportOptions) (string, error) {
	name, email := opts.AuthorName, opts.AuthorEmail
	if name == "" || email == "" {
		cfgName, cfgEmail := configIdentity(ctx, repo)
		if name == "" {
			name = cfgName
		}
		if email == "" {
			email = cfgEmail
		}
	}
	name, email = cleanIdent(name, fallbackName), cleanIdent(email, fallbackEmail)
	env := []string{
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email,
	}
	msg := opts.Message
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	out, err := gitCmd{dir: repo, args: []string{"commit-tree", "--no-gpg-sign", "-p", opts.Base, "-F", "-", tree}, env: env, stdin: strings.NewReader(msg)}.run(ctx)
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(out))
	if !isObjectID(commit) {
		return "", fmt.Errorf("commit-tree: unexpected output %q", commit)
	}
	return commit, nil
}

// configIdentity is the repository's configured user.name and user.email.
func configIdentity(ctx context.Context, repo string) (name, email string) {
	name, _ = git(ctx, repo, "config", "--get", "user.name")
	email, _ = git(ctx, repo, "config", "--get", "user.email")
	return name, email
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

// diffArgs are the flags of every diff: no textconv, no external diff, no
// colour, fixed prefixes, rename detection.
var diffArgs = []string{"--no-textconv", "--no-ext-diff", "--no-color", "-M", "--submodule=short", "--ignore-submodules=none"}

func diffCmd(repo string, base, commit string, extra ...string) gitCmd {
	args := append([]string{"diff"}, diffArgs...)
	args = append(args, extra...)
	args = append(args, base, commit, "--")
	return gitCmd{dir: repo, args: args}
}

// writePatch writes the binary-safe patch atomically to path.
func writePatch(ctx context.Context, repo, base, commit, path string) error {
	out, err := diffCmd(repo, base, commit, "--binary", "--src-prefix=a/", "--dst-prefix=b/").run(ctx)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, out)
}

// diffStats fills files changed, insertions, deletions and the diffstat.
func diffStats(ctx context.Context, repo, base, commit string, res *run.ExportResult) error {
	out, err := diffCmd(repo, base, commit, "--numstat", "-z").run(ctx)
	if err != nil {
		return err
	}
	files, ins, del, err := parseNumstat(out)
	if err != nil {
		return err
	}
	res.FilesChanged, res.Insertions, res.Deletions = files, ins, del
	stat, err := diffCmd(repo, base, commit, "--stat=100").run(ctx)
	if err != nil {
		return err
	}
	res.Diffstat = string(stat)
	return nil
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

// writeFileAtomic writes data to path via a synced temp file and rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
