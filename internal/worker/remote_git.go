package worker

// remote_git.go: the host's cache of each project, a bare repository
// under its data directory (projects/NAME.git) that holds the base
// commits fetched from the server (as bundles) and the branches of the
// runs while they are here. Git runs with hooks, fsmonitor and the pager
// off; nothing is checked out.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrun/agentrun/internal/bundlecheck"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
)

var projectName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

var commitID = lazyre.New(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

func (w *Remote) projectRepo(project string) string {
	return filepath.Join(w.Data, "projects", project+".git")
}

// fetchBase makes sure the project's cache holds base, fetching a bundle
// of it from the server when it does not, and returns the cache.
func (w *Remote) fetchBase(ctx context.Context, j *job, base string) (string, error) {
	if !projectName.MatchString(j.project) || !commitID.MatchString(base) {
		return "", catalog.ServerProtocol.New("the claim of run %s names project %q and base %q", j.id, j.project, base)
	}
	defer w.lockProject(j.project)()
	repo := w.projectRepo(j.project)
	// A base fetched once stays in the cache (its ref keeps it): the
	// next run on it starts without asking git.
	if w.hasBase(repo, base) {
		return repo, nil
	}
	if _, err := os.Stat(filepath.Join(repo, "objects")); err != nil {
		if err := os.MkdirAll(filepath.Dir(repo), 0o700); err != nil {
			return "", err
		}
		if _, err := bundlecheck.Git(ctx, filepath.Dir(repo), nil, "init", "-q", "--bare", "--template=", repo); err != nil {
			return "", err
		}
	}
	if _, err := bundlecheck.Git(ctx, repo, nil, "cat-file", "-e", base+"^{commit}"); err == nil {
		w.keptBase(repo, base)
		return repo, nil
	}
	f, err := os.CreateTemp(filepath.Dir(repo), ".base-*.bundle")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	q := (&remoteStore{j: j}).tokenQuery()
	err = w.Client.Fetch(ctx, "/v1/hosts/runs/"+j.id+"/base", q, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("fetch the base of %s: %w", j.id, err)
	}
	ref := "refs/agentrun/bases/" + base
	if _, err := bundlecheck.Git(ctx, repo, nil, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head",
		f.Name(), "+"+ref+":"+ref); err != nil {
		return "", fmt.Errorf("fetch the base of %s: %w", j.id, err)
	}
	if _, err := bundlecheck.Git(ctx, repo, nil, "cat-file", "-e", base+"^{commit}"); err != nil {
		return "", fmt.Errorf("the base bundle of %s lacks %s", j.id, base)
	}
	w.keptBase(repo, base)
	return repo, nil
}

// hasBase reports whether base is known to be in the cache repo.
func (w *Remote) hasBase(repo, base string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bases[repo+" "+base]
}

// keptBase notes that the cache repo holds base.
func (w *Remote) keptBase(repo, base string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bases == nil {
		w.bases = map[string]bool{}
	}
	w.bases[repo+" "+base] = true
}

// bundleBranch bundles branch of repo without base's history, in dir.
func (w *Remote) bundleBranch(ctx context.Context, repo, dir, branch, base string) (string, error) {
	path := filepath.Join(dir, "result.bundle")
	_ = os.Remove(path)
	if _, err := bundlecheck.Git(ctx, repo, nil, "bundle", "create", "-q", path, "refs/heads/"+branch, "^"+base); err != nil {
		return "", err
	}
	return path, nil
}

// dropBranch deletes a run's branch from the project's cache, and every
// cachePruneEvery runs prunes the cache (pruneCache).
func (w *Remote) dropBranch(ctx context.Context, project, branch string) {
	if !projectName.MatchString(project) {
		return
	}
	repo := w.projectRepo(project)
	if _, err := os.Stat(repo); err != nil {
		return
	}
	_, _ = bundlecheck.Git(ctx, repo, nil, "update-ref", "-d", "refs/heads/"+branch)
	w.mu.Lock()
	if w.dropped == nil {
		w.dropped = map[string]int{}
	}
	w.dropped[project]++
	due := w.dropped[project] >= cachePruneEvery
	if due {
		w.dropped[project] = 0
	}
	w.mu.Unlock()
	if due {
		w.pruneCache(ctx, repo)
	}
}

// cachePruneEvery is how many runs leave a project's cache between two
// prunes of it.
const cachePruneEvery = 256

// cacheGrace is the age below which an object nothing names is kept in a
// cache: a run's export writes its objects before its branch names them
// (and freshens those the cache held already, as git does).
const cacheGrace = "1.hour.ago"

// pruneCache removes the objects of the runs that left the cache repo:
// each run's export writes its result there as loose objects, which its
// branch kept until the run left, so that a host's disk would otherwise
// fill with every result it ever made (12 KiB a run for a one-file
// result, 250 MiB at 20,000). What the kept bases and the branches of the
// runs still here reach stays, and so does anything younger than
// cacheGrace.
func (w *Remote) pruneCache(ctx context.Context, repo string) {
	if _, err := bundlecheck.Git(ctx, repo, nil, "prune", "--expire="+cacheGrace); err != nil {
		w.log().Warn("prune the project cache", "repo", repo, "error", err.Error())
	}
}
