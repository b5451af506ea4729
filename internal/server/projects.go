package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/bundlecheck"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
)

// DefaultMaxBundle bounds an uploaded bundle when Projects leaves it zero.
const DefaultMaxBundle = 1 << 30

// projectName is what a project may be called: it names a directory.
var projectName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// objectID is a full commit id (sha1 or sha256).
var objectID = lazyre.New(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// Projects keeps one bare repository per project under Dir: the base
// commits clients sent (each kept by a ref refs/agentrun/bases/ID) and the
// branches agentrun/<id> their runs exported. Nothing in a bundle is run:
// git runs with hooks off, on the server's own configuration, and a
// bundle is verified on a quarantined copy before anything is fetched
// from it.
type Projects struct {
	Dir string
	// MaxBundle bounds an uploaded bundle in bytes (0: DefaultMaxBundle).
	MaxBundle int64
	// PackLimit is how many packs a project holds before an import has
	// them rolled up (0: DefaultPackLimit; negative: never).
	PackLimit int
	// Log takes what goes wrong in the background (nil: nothing).
	Log *slog.Logger

	tidying tidying

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// Repo is project name's repository path (which may not exist yet).
func (p *Projects) Repo(name string) string { return filepath.Join(p.Dir, name+".git") }

func (p *Projects) lock(name string) func() {
	p.mu.Lock()
	if p.locks == nil {
		p.locks = map[string]*sync.Mutex{}
	}
	l := p.locks[name]
	if l == nil {
		l = &sync.Mutex{}
		p.locks[name] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Import reads a bundle from body into a quarantine, verifies it and
// fetches it there (against the project's objects), then fetches the
// head that base names (a ref name as the bundle lists it, or a head's
// commit id; "" is the bundle's HEAD, or its only head) into the project. It returns the repository
// and the base commit. Errors are catalog errors (bad_bundle, bad_request).
func (p *Projects) Import(ctx context.Context, project string, body io.Reader, base string) (repo, commit string, err error) {
	if !projectName.MatchString(project) {
		return "", "", catalog.BadRequest.New("project %q: letters, digits, '-' and '_', at most 64", project)
	}
	q, err := p.quarantine()
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(q)
	bundle := filepath.Join(q, "base.bundle")
	if err := p.receive(body, bundle); err != nil {
		return "", "", err
	}
	repo = p.Repo(project)
	objects := filepath.Join(repo, "objects")
	_, statErr := os.Stat(objects)
	if statErr == nil {
		// The same base submitted again (a client that sends its base
		// with every submit): the bundle's heads name it, and the project
		// keeps it already. Nothing of the bundle is read but its heads,
		// and nothing of it reaches the project.
		if _, commit, err := pickHead(ctx, repo, bundle, base); err == nil && keepsBase(repo, commit) {
			return repo, commit, nil
		}
	}
	// Everything is tried on a quarantined repository first (its objects
	// borrow the project's, so the bundle's prerequisites resolve): a
	// bundle that verify lets through but that does not fetch whole (a
	// truncated pack) leaves nothing in the project. The quarantine is
	// the submit's own, and objects only ever arrive in the project: the
	// project's lock is held only to change the project, so that submits
	// and hosts' result uploads at once do not queue behind each other's
	// checks.
	check := filepath.Join(q, "check.git")
	// The quarantine, and a new project, are of the project's object
	// format, or the bundle's for a new project.
	borrow, format := "", bundleFormat(bundle)
	if statErr == nil {
		borrow = objects
		if format, err = git(ctx, repo, "rev-parse", "--show-object-format"); err != nil {
			return "", "", fmt.Errorf("object format of %s: %w", repo, err)
		}
	}
	if err := bundlecheck.BorrowingObjects(borrow, format, check, basesRefs); err != nil {
		return "", "", fmt.Errorf("quarantine: %w", err)
	}
	if _, err := git(ctx, check, "bundle", "verify", "-q", bundle); err != nil {
		return "", "", catalog.BadBundle.Wrap(err, "git bundle verify: %s", gitMessage(err))
	}
	ref, commit, err := pickHead(ctx, check, bundle, base)
	if err != nil {
		return "", "", err
	}
	if err := fetchBase(ctx, check, bundle, ref, commit); err != nil {
		return "", "", err
	}
	defer p.lock(project)()
	if err := initBare(ctx, repo, format); err != nil {
		return "", "", err
	}
	// A base the project keeps already (the same base submitted again)
	// needs no fetch.
	if kept, err := git(ctx, repo, "rev-parse", "--verify", "-q", basesRefs+commit); err == nil && strings.TrimSpace(kept) == commit {
		return repo, commit, nil
	}
	// The quarantine checked every object it fetched (against the
	// project's, when it had any): they move in as they are, and the ref
	// that keeps the base is made; a project they cannot be linked into
	// fetches the bundle again.
	defer p.tidy(repo)
	if err := bundlecheck.Migrate(check, objects); err == nil {
		if _, err := git(ctx, repo, "update-ref", basesRefs+commit, commit); err == nil {
			return repo, commit, nil
		}
	}
	if err := fetchBase(ctx, repo, bundle, ref, commit); err != nil {
		return "", "", err
	}
	return repo, commit, nil
}

// basesRefs holds a ref for each base commit a project keeps (named by
// the commit): what a quarantine's connectivity check stops at, where the
// project's branches (one per run) would make it grow with the runs.
const basesRefs = "refs/agentrun/bases/"

// keepsBase reports that repo's loose ref refs/agentrun/bases/COMMIT
// holds commit (what fetchBase made after checking it). A ref git packed
// is not seen: the caller then takes the long way.
func keepsBase(repo, commit string) bool {
	if !objectID.MatchString(commit) {
		return false
	}
	b, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(basesRefs), commit))
	return err == nil && strings.TrimSpace(string(b)) == commit
}

// bundleFormat is the object format a bundle's header names: a v3
// bundle says "@object-format=sha256"; v2 is sha1.
func bundleFormat(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "sha1"
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	if bytes.Contains(head[:n], []byte("\n@object-format=sha256\n")) {
		return "sha256"
	}
	return "sha1"
}

// fetchBase fetches head ref (commit) of bundle into repo, checking every
// object, and keeps it by refs/agentrun/bases/COMMIT.
func fetchBase(ctx context.Context, repo, bundle, ref, commit string) error {
	if _, err := git(ctx, repo, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head",
		bundle, "+"+ref+":"+basesRefs+commit); err != nil {
		return catalog.BadBundle.Wrap(err, "fetch %s from the bundle: %s", ref, gitMessage(err))
	}
	if _, err := git(ctx, repo, "rev-parse", "--verify", "-q", commit+"^{commit}"); err != nil {
		return catalog.BadBundle.New("%s in the bundle is not a commit", ref)
	}
	return nil
}

// Sweep removes what uploads left in quarantine (a server stopped in the
// middle of one). Call it before serving.
func (p *Projects) Sweep() error {
	return os.RemoveAll(filepath.Join(p.Dir, ".quarantine"))
}

// quarantine makes a fresh directory for one upload.
func (p *Projects) quarantine() (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(p.Dir, ".quarantine", hex.EncodeToString(b[:]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("quarantine: %w", err)
	}
	return dir, nil
}

// receive writes the bundle, at most MaxBundle bytes of it.
func (p *Projects) receive(body io.Reader, path string) error {
	limit := p.MaxBundle
	if limit <= 0 {
		limit = DefaultMaxBundle
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("receive bundle: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(body, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return catalog.BadBundle.Wrap(err, "reading the bundle: %v", err)
	case n > limit:
		return catalog.BadBundle.New("the bundle is over %d bytes", limit)
	case n == 0:
		return catalog.BadBundle.New("the bundle is empty")
	}
	return nil
}

// pickHead finds the bundle's head that base names.
func pickHead(ctx context.Context, dir, bundle, base string) (ref, commit string, err error) {
	out, err := git(ctx, dir, "bundle", "list-heads", bundle)
	if err != nil {
		return "", "", catalog.BadBundle.Wrap(err, "git bundle list-heads: %s", gitMessage(err))
	}
	type head struct{ id, ref string }
	var heads []head
	for _, l := range strings.Split(out, "\n") {
		id, name, ok := strings.Cut(strings.TrimSpace(l), " ")
		if ok && objectID.MatchString(id) {
			heads = append(heads, head{id, name})
		}
	}
	var names []string
	for _, h := range heads {
		names = append(names, h.ref)
		if (base == "" && h.ref == "HEAD") || (base != "" && (h.ref == base || h.id == base || h.ref == "refs/heads/"+base || h.ref == "refs/tags/"+base)) {
			return h.ref, h.id, nil
		}
	}
	if base == "" && len(heads) == 1 {
		return heads[0].ref, heads[0].id, nil
	}
	if base == "" {
		return "", "", catalog.BadBundle.New("the bundle has no HEAD and %d heads (%s): name one as base", len(heads), strings.Join(names, ", "))
	}
	return "", "", catalog.BadBundle.New("base %q is none of the bundle's heads (%s)", base, strings.Join(names, ", "))
}

// Bundle writes a bundle of branch (refs/heads/BRANCH) of repo, without
// the history of base (which the client has), to w.
func (p *Projects) Bundle(ctx context.Context, w io.Writer, repo, branch, base string) error {
	cmd := gitCommand(ctx, repo, "bundle", "create", "-q", "-", "refs/heads/"+branch, "^"+base)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return &gitError{args: cmd.Args, stderr: stderr.String(), err: err}
	}
	return nil
}

// ResolveBare is submit's view of a project repository (see
// submit.Service.Inspect): bare, so nothing is ever dirty; ref must name a
// commit that Import fetched.
func ResolveBare(ctx context.Context, dir, ref string) (path, base string, dirty bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, "objects")); err != nil {
		return "", "", false, catalog.RepoMissing.Wrap(err, "%s is not a project repository of this server", dir)
	}
	if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, "\x00\n") {
		return "", "", false, catalog.UnknownBase.New("%q is not a ref", ref)
	}
	if keepsBase(dir, ref) {
		// A base Import kept (the submit's own, as it names it): checked
		// to be a commit when it was fetched.
		return dir, ref, false, nil
	}
	out, err := git(ctx, dir, "rev-parse", "--verify", "-q", "--end-of-options", ref+"^{commit}")
	if err != nil || !objectID.MatchString(out) {
		return "", "", false, catalog.UnknownBase.New("%q does not name a commit in %s", ref, dir)
	}
	return dir, out, false, nil
}

// initBare makes dir a bare repository of object format, unless it is one.
func initBare(ctx context.Context, dir, format string) error {
	if _, err := os.Stat(filepath.Join(dir, "objects")); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	// No template: no sample hooks, nothing but what git needs.
	if _, err := git(ctx, "", "init", "-q", "--bare", "--template=", "--object-format="+format, dir); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	return nil
}

// gitCommand is git as the server runs it: bundlecheck's safety settings
// (no hooks, fsmonitor, pager or automatic gc), none of the server's GIT_
// variables.
func gitCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	return bundlecheck.Command(ctx, dir, nil, args...)
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := gitCommand(ctx, dir, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", catalog.GitMissing.Wrap(err, "git was not found on the server's PATH")
		}
		return "", &gitError{args: args, stderr: stderr.String(), err: err}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, strings.TrimSpace(e.stderr))
}

func (e *gitError) Unwrap() error { return e.err }

// gitMessage is the first line of git's complaint.
func gitMessage(err error) string {
	var ge *gitError
	if errors.As(err, &ge) {
		msg, _, _ := strings.Cut(strings.TrimSpace(ge.stderr), "\n")
		if msg = strings.TrimPrefix(strings.TrimPrefix(msg, "error: "), "fatal: "); msg != "" {
			return msg
		}
	}
	return err.Error()
}
