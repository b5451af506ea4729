package cli

// remote_import.go: the base commit goes to a team server as a git
// bundle, and a run's branch comes back as one. Both are made or read in
// a temporary bare repository that borrows the user's objects (read-only,
// through objects/info/alternates): no ref of the user's repository is
// touched to make a bundle, and nothing of a bundle reaches it before it
// is checked. Git runs with hooks, fsmonitor and the pager off; a bundle
// carries no configuration, and nothing is ever checked out.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/bundlecheck"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
)

// baseHead is the head a submit's bundle holds the base commit under.
const baseHead = "refs/heads/agentrun-base"

// bundleBase writes a bundle of commit base of repo under dir and returns
// its path: base's history, without what the commits of have (which the
// server holds) reach, so the bundle needs them as prerequisites.
func bundleBase(ctx context.Context, repo, base, dir string, have []string) (string, error) {
	q := filepath.Join(dir, "base.git")
	if err := bundlecheck.Borrowing(ctx, repo, q); err != nil {
		return "", fmt.Errorf("bundle the base commit: %w", err)
	}
	if _, err := bundlecheck.Git(ctx, q, nil, "update-ref", baseHead, base); err != nil {
		return "", fmt.Errorf("bundle the base commit: %w", err)
	}
	path := filepath.Join(dir, "base.bundle")
	args := []string{"bundle", "create", "-q", path, baseHead}
	if len(have) > 0 {
		args = append(append(args, "--not"), have...)
	}
	if _, err := bundlecheck.Git(ctx, q, nil, args...); err != nil {
		return "", fmt.Errorf("bundle the base commit: %w", err)
	}
	return path, nil
}

// runBranch is what a run's branch must be called: a server cannot name
// another branch of the user's.
var runBranch = lazyre.New(`^agentrun/[0-9a-z]{10}$`)

// importResult brings run r's branch from the server into repo: the
// bundle is fetched into a quarantine, its commit must have the run's
// base as its only parent and the base with the run's patch as its tree;
// then its objects are fetched into repo and the branch is created with
// update-ref, never over a branch that points elsewhere.
func (app *App) importResult(ctx context.Context, repo string, r *run.Run) error {
	commit := resultCommit(r)
	bad := func(format string, args ...any) error {
		return catalog.BadResult.New("run %s: "+format, append([]any{r.ID}, args...)...)
	}
	if !runBranch.MatchString(r.Branch) || r.Branch != "agentrun/"+r.ID {
		return bad("the server names its branch %q", r.Branch)
	}
	if !objectName.MatchString(commit) || !objectName.MatchString(r.Base) {
		return bad("commit %q, base %q are not commit ids", commit, r.Base)
	}
	ref := "refs/heads/" + r.Branch
	if have, err := bundlecheck.Git(ctx, repo, nil, "rev-parse", "--verify", "-q", ref); err == nil && have == commit {
		return nil // brought here before
	}
	if _, err := bundlecheck.Git(ctx, repo, nil, "cat-file", "-e", r.Base+"^{commit}"); err != nil {
		return bad("its base commit %s is not in %s", shortCommit(r.Base), repo)
	}
	dir, err := os.MkdirTemp("", "agentrun-result-")
	if err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	defer os.RemoveAll(dir)
	bundle := filepath.Join(dir, "run.bundle")
	f, err := os.OpenFile(bundle, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	err = app.remote.Download(ctx, runPath(r.ID, "bundle"), f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	patch := filepath.Join(dir, "run.patch")
	doc, err := app.remote.Get(ctx, runPath(r.ID, "diff"), nil)
	if err != nil {
		return err
	}
	var d struct {
		Patch string `json:"patch"`
	}
	if err := decodeDoc(doc, &d); err != nil {
		return err
	}
	if err := os.WriteFile(patch, []byte(d.Patch), 0o600); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	q := filepath.Join(dir, "check.git")
	if err := bundlecheck.Borrowing(ctx, repo, q); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if err := checkBundle(ctx, q, bundle, patch, ref, commit, r.Base); err != nil {
		return bad("%v", err)
	}
	// The checked objects, then the branch: "" as the old value makes
	// update-ref refuse a branch that exists.
	if _, err := bundlecheck.Git(ctx, repo, nil, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head", bundle, ref); err != nil {
		return bad("fetch into %s: %v", repo, err)
	}
	if _, err := bundlecheck.Git(ctx, repo, nil, "update-ref", "-m", "agentrun: the result of run "+r.ID+" from "+app.remote.URL(), ref, commit, ""); err != nil {
		have, _ := bundlecheck.Git(ctx, repo, nil, "rev-parse", "--verify", "-q", ref)
		if have != "" && have != commit {
			return catalog.BranchExists.New("%s in %s is %s, the run's result is %s", r.Branch, repo, shortCommit(have), shortCommit(commit)).
				WithFix("look at it and delete it (git branch -D %s) if it is stale, then 'agentrun result %s' again", r.Branch, r.ID)
		}
		if have != commit {
			return fmt.Errorf("create %s: %w", r.Branch, err)
		}
	}
	return nil
}

// objectName is a full commit id.
var objectName = lazyre.New(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// checkBundle fetches ref of bundle into the quarantine q and checks that
// it is commit, whose only parent is base and whose tree is base's with
// patch applied (the server checks a host's upload the same way).
func checkBundle(ctx context.Context, q, bundle, patch, ref, commit, base string) error {
	return bundlecheck.Check(ctx, q, bundle, patch, ref, commit, base)
}
