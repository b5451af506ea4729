package server

// projects_hosts.go: what an agent host fetches from a project (the base
// commit, as a bundle) and what it sends back (the run's branch, as a
// bundle checked before anything of it reaches the project).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/internal/bundlecheck"
	"github.com/agentrun/agentrun/internal/catalog"
)

// project is the name of the project whose repository is repo.
func (p *Projects) project(repo string) (string, bool) {
	name := strings.TrimSuffix(filepath.Base(repo), ".git")
	return name, projectName.MatchString(name) && p.Repo(name) == repo
}

// BaseBundle writes a bundle of base (kept by refs/agentrun/bases/BASE)
// of repo, with its whole history, to w.
func (p *Projects) BaseBundle(ctx context.Context, w io.Writer, repo, base string) error {
	if !objectID.MatchString(base) {
		return catalog.BadRequest.New("base %q is not a commit id", base)
	}
	cmd := gitCommand(ctx, repo, "bundle", "create", "-q", "-", basesRefs+base)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return &gitError{args: cmd.Args, stderr: stderr.String(), err: err}
	}
	return nil
}

// ImportResult checks bundle (a host's upload of run branch) in a
// quarantine that borrows the project's objects: its branch must be
// commit, whose only parent is base and whose tree is base with patch;
// then moves the quarantine's objects into repo (fetching them again
// where they cannot be linked there) and points refs/heads/BRANCH at
// commit with update-ref. undo puts the branch back as it was (the run's
// record could not be written after all).
func (p *Projects) ImportResult(ctx context.Context, repo, bundle, patch, branch, commit, base string) (undo func(), err error) {
	bad := func(format string, args ...any) error {
		return catalog.BadResult.New("the upload of %s: "+format, append([]any{branch}, args...)...)
	}
	if !objectID.MatchString(commit) || !objectID.MatchString(base) || !strings.HasPrefix(branch, "agentrun/") {
		return nil, bad("commit %q, base %q are not commit ids", commit, base)
	}
	name, ok := p.project(repo)
	if !ok {
		return nil, bad("%s is not a project repository of this server", repo)
	}
	q, err := p.quarantine()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(q)
	check := filepath.Join(q, "check.git")
	objects := filepath.Join(repo, "objects")
	if err := bundlecheck.BorrowingObjects(objects, bundlecheck.FormatOf(commit), check, basesRefs); err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	ref := "refs/heads/" + branch
	if err := bundlecheck.Check(ctx, check, bundle, patch, ref, commit, base); err != nil {
		return nil, bad("%v", err)
	}
	defer p.lock(name)()
	// The quarantine checked every object it fetched, against the
	// project's: they move in as they are (no second fetch and fsck).
	if err := bundlecheck.Migrate(check, objects); err != nil {
		if _, err := git(ctx, repo, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head", bundle, ref); err != nil {
			return nil, bad("fetch: %s", gitMessage(err))
		}
	}
	old, _ := git(ctx, repo, "rev-parse", "--verify", "-q", ref)
	if _, err := git(ctx, repo, "update-ref", "-m", "agentrun: the result of the run, from its agent host", ref, commit, old); err != nil {
		return nil, fmt.Errorf("update %s: %w", ref, err)
	}
	p.tidy(repo)
	return func() {
		uctx := context.WithoutCancel(ctx)
		defer p.lock(name)()
		if old == "" {
			_, _ = git(uctx, repo, "update-ref", "-d", ref, commit)
		} else {
			_, _ = git(uctx, repo, "update-ref", ref, old, commit)
		}
	}, nil
}
