package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/catalog"
)

// Repo is the user's repository. Every method runs git in it, with the
// safety flags, and never in a workspace.
type Repo struct {
	path   string // top level of the work tree
	format string // object format: sha1 or sha256
	head   string // the commit at HEAD when it was opened
}

// OpenRepo resolves the repository containing dir. Catalog errors:
// RepoMissing, NotGitRepo, NoCommits, GitMissing. It runs one git process.
func OpenRepo(ctx context.Context, dir string) (*Repo, error) {
	if err := checkRepoDir(dir); err != nil {
		return nil, err
	}
	return openRepo(ctx, dir)
}

// checkRepoDir is what OpenRepo checks before running git.
func checkRepoDir(dir string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return catalog.GitMissing.Wrap(err, "git was not found on PATH")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return catalog.RepoMissing.Wrap(err, "%s does not exist", dir)
		}
		return catalog.RepoMissing.Wrap(err, "%s: %v", dir, err)
	}
	if !fi.IsDir() {
		return catalog.RepoMissing.New("%s is not a directory", dir)
	}
	return nil
}

// openRepo asks one rev-parse for the top level, the object format and the
// commit at HEAD: it prints the first two and then fails with status 1
// (not 128) when HEAD names no commit.
func openRepo(ctx context.Context, dir string) (*Repo, error) {
	args := []string{"rev-parse", "--show-toplevel", "--show-object-format", "--verify", "-q", "HEAD^{commit}"}
	cmd := gitCmd{dir: dir, args: args}.command(ctx)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err != nil {
		if !errors.Is(err, exec.ErrNotFound) {
			err = &gitError{args: args, stderr: stderr.String(), err: err}
		}
		if errors.Is(err, exec.ErrNotFound) {
			return nil, catalog.GitMissing.Wrap(err, "git was not found on PATH")
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if exitCode(err) == 1 && len(lines) == 2 && lines[0] != "" {
			return nil, catalog.NoCommits.Wrap(err, "%s has no commit at HEAD", lines[0])
		}
		msg := gitMessage(err)
		if strings.Contains(msg, "must be run in a work tree") {
			// git finds a repository there, but no work tree to run in.
			return nil, catalog.NotGitRepo.Wrap(err, "%s is inside a repository's .git directory (or a bare repository), not in a work tree", dir)
		}
		return nil, catalog.NotGitRepo.Wrap(err, "%s: %s", dir, msg)
	}
	if len(lines) != 3 || lines[0] == "" {
		return nil, catalog.NotGitRepo.New("%s has no work tree", dir)
	}
	if !isObjectID(lines[2]) {
		return nil, fmt.Errorf("open %s: unexpected HEAD %q", dir, lines[2])
	}
	return &Repo{path: lines[0], format: lines[1], head: lines[2]}, nil
}

// Inspect is OpenRepo, ResolveBase(ref) and Dirty at once: the git
// processes run side by side (from dir, which any of them may use: git
// finds the top level itself), and the errors are reported in that order.
func Inspect(ctx context.Context, dir, ref string) (repo *Repo, base string, dirty bool, err error) {
	if err := checkRepoDir(dir); err != nil {
		return nil, "", false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var dirtyErr, baseErr error
	var wg sync.WaitGroup
	wg.Go(func() { dirty, dirtyErr = dirtyIn(ctx, dir) })
	if ref != "" && ref != "HEAD" {
		wg.Go(func() { base, baseErr = resolveIn(ctx, dir, ref) })
	}
	repo, err = openRepo(ctx, dir)
	if err != nil {
		cancel()
		wg.Wait()
		return nil, "", false, err
	}
	wg.Wait()
	if base == "" && baseErr == nil {
		base = repo.head
	}
	if baseErr != nil {
		return nil, "", false, errIn(baseErr, repo.path)
	}
	if dirtyErr != nil {
		return nil, "", false, fmt.Errorf("status of %s: %w", repo.path, dirtyErr)
	}
	return repo, base, dirty, nil
}

// unknownBase is a ref that names no commit, before it becomes the
// catalog error that names the repository (errIn).
type unknownBase struct {
	ref string
	err error
}

func (e *unknownBase) Error() string { return fmt.Sprintf("%q does not name a commit", e.ref) }

// errIn makes an unknownBase the catalog error, naming the repository.
func errIn(err error, path string) error {
	var ub *unknownBase
	if errors.As(err, &ub) {
		return catalog.UnknownBase.Wrap(ub.err, "%q does not name a commit in %s", ub.ref, path)
	}
	return err
}

// gitMessage is the first line of git's complaint in err.
func gitMessage(err error) string {
	var ge *gitError
	if errors.As(err, &ge) {
		msg, _, _ := strings.Cut(strings.TrimSpace(ge.stderr), "\n")
		msg = strings.TrimPrefix(msg, "fatal: ")
		if msg != "" {
			return msg
		}
	}
	return err.Error()
}

// Path is the top level of the repository's work tree.
func (r *Repo) Path() string { return r.path }

// ObjectFormat is sha1 or sha256.
func (r *Repo) ObjectFormat() string { return r.format }

// ResolveBase resolves ref (default HEAD) to a full commit id. A ref that
// does not name a commit, or starts with '-', is a catalog.UnknownBase
// error.
func (r *Repo) ResolveBase(ctx context.Context, ref string) (string, error) {
	base, err := resolveIn(ctx, r.path, ref)
	if err != nil {
		return "", errIn(err, r.path)
	}
	return base, nil
}

// resolveIn resolves ref in the repository containing dir.
func resolveIn(ctx context.Context, dir, ref string) (string, error) {
	if ref == "" {
		ref = "HEAD"
	}
	if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, "\x00\n") {
		return "", catalog.UnknownBase.New("%q is not a ref", ref)
	}
	out, err := git(ctx, dir, "rev-parse", "--verify", "-q", "--end-of-options", ref+"^{commit}")
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &unknownBase{ref: ref, err: err}
	}
	if !isObjectID(out) {
		return "", fmt.Errorf("resolve %q: unexpected output %q", ref, out)
	}
	return out, nil
}

// Dirty reports uncommitted changes: tracked or untracked, ignoring
// ignored files.
func (r *Repo) Dirty(ctx context.Context) (bool, error) {
	dirty, err := dirtyIn(ctx, r.path)
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", r.path, err)
	}
	return dirty, nil
}

// dirtyIn runs status in the repository containing dir.
func dirtyIn(ctx context.Context, dir string) (bool, error) {
	out, err := git(ctx, dir, "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=normal", "--ignore-submodules=none")
	if err != nil {
		return false, err
	}
	return out != "", nil
}

// BranchTip returns the commit at refs/heads/branch, and whether the
// branch exists.
func (r *Repo) BranchTip(ctx context.Context, branch string) (string, bool, error) {
	if err := checkBranchName(branch); err != nil {
		return "", false, err
	}
	return r.refTip(ctx, "refs/heads/"+branch)
}

func (r *Repo) refTip(ctx context.Context, ref string) (string, bool, error) {
	out, err := git(ctx, r.path, "rev-parse", "--verify", "-q", "--end-of-options", ref)
	if err != nil {
		if ctx.Err() != nil {
			return "", false, ctx.Err()
		}
		if exitCode(err) == 1 {
			return "", false, nil
		}
		return "", false, fmt.Errorf("read %s: %w", ref, err)
	}
	return out, true, nil
}

// RunBranches lists the repository's agentrun/* branches: name -> tip.
func (r *Repo) RunBranches(ctx context.Context) (map[string]string, error) {
	out, err := git(ctx, r.path, "for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads/agentrun/")
	if err != nil {
		return nil, fmt.Errorf("list agentrun branches: %w", err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if name, tip, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			m[name] = tip
		}
	}
	return m, nil
}

// DeleteBranch deletes refs/heads/branch only if it still points at
// expectTip: a branch that moved is kept and ErrBranchMoved is returned.
// A branch that no longer exists is not an error.
func (r *Repo) DeleteBranch(ctx context.Context, branch, expectTip string) error {
	if err := checkBranchName(branch); err != nil {
		return err
	}
	if !isObjectID(expectTip) {
		return fmt.Errorf("delete branch %s: expected tip %q is not a full object id", branch, expectTip)
	}
	tip, ok, err := r.BranchTip(ctx, branch)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if tip != expectTip {
		return fmt.Errorf("delete branch %s: at %s, expected %s: %w", branch, tip, expectTip, ErrBranchMoved)
	}
	// Like git branch -D, keep a branch some worktree has checked out:
	// deleting it would leave that worktree on an unborn branch.
	wts, err := git(ctx, r.path, "worktree", "list", "--porcelain")
	if err != nil {
		return fmt.Errorf("delete branch %s: %w", branch, err)
	}
	var wt string
	for line := range strings.SplitSeq(wts, "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			wt = p
		} else if line == "branch refs/heads/"+branch {
			return fmt.Errorf("delete branch %s: it is checked out in %s", branch, wt)
		}
	}
	if _, err := git(ctx, r.path, "update-ref", "-m", "agentrun: clean", "-d", "refs/heads/"+branch, expectTip); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("delete branch %s: %w (%w)", branch, err, ErrBranchMoved)
	}
	return nil
}

// checkBranchName refuses names git would read as options or that are not
// valid branch names.
func checkBranchName(branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") || strings.HasPrefix(branch, "refs/") {
		return fmt.Errorf("invalid branch name %q", branch)
	}
	for _, c := range []byte(branch) {
		if c < 0x20 || c == 0x7f || c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' || c == '\\' {
			return fmt.Errorf("invalid branch name %q", branch)
		}
	}
	if strings.Contains(branch, "..") || strings.Contains(branch, "@{") || strings.Contains(branch, "//") ||
		strings.HasSuffix(branch, "/") || strings.HasSuffix(branch, ".") || strings.HasSuffix(branch, ".lock") ||
		strings.HasPrefix(branch, "/") || strings.Contains(branch, "/.") || strings.HasPrefix(branch, ".") || branch == "@" {
		return fmt.Errorf("invalid branch name %q", branch)
	}
	return nil
}

// isObjectID reports a full lowercase hex SHA-1 or SHA-256 id.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
