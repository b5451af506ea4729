// Package bundlecheck checks that a git bundle holds a run's result and
// nothing else: one commit whose only parent is the run's base and whose
// tree is the base's with the run's patch applied. The CLI checks the
// bundle a team server sends back; the server checks the one an agent
// host uploads. Git runs in a quarantine repository with hooks, fsmonitor
// and the pager off; nothing is checked out.
package bundlecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
)

// Safety is given to every git run on a repository that holds what came
// in a bundle.
var Safety = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
	"-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "protocol.ext.allow=never"}

// Command is git in dir ("": the current directory) with Safety and the
// arguments, its environment this process's without the GIT_ variables
// (git acts only on the repository named), plus env.
func Command(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	full := append(append([]string{}, Safety...), args...)
	if dir != "" {
		full = append([]string{"-C", dir}, full...)
	}
	cmd := exec.CommandContext(ctx, "git", full...)
	var keep []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "GIT_") && name != "GIT_CONFIG_GLOBAL" && name != "GIT_CONFIG_NOSYSTEM" {
			continue
		}
		keep = append(keep, kv)
	}
	cmd.Env = append(append(keep, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0"), env...)
	return cmd
}

// Git runs Command and returns its trimmed output.
func Git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := Command(ctx, dir, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", catalog.GitMissing.Wrap(err, "git was not found on PATH")
		}
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Borrowing makes a bare repository at dir whose objects include those
// of repo (read-only, through objects/info/alternates).
func Borrowing(ctx context.Context, repo, dir string) error {
	objects, err := Git(ctx, repo, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return err
	}
	if _, err := Git(ctx, filepath.Dir(dir), nil, "init", "-q", "--bare", "--template=", dir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "objects", "info", "alternates"), []byte(filepath.Join(objects, "objects")+"\n"), 0o600)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Check fetches ref of bundle into the quarantine q (see Borrowing) and
// checks that it is commit, whose only parent is base and whose tree is
// base's with patch applied.
func Check(ctx context.Context, q, bundle, patch, ref, commit, base string) error {
	if _, err := Git(ctx, q, nil, "bundle", "verify", "-q", bundle); err != nil {
		return err
	}
	if _, err := Git(ctx, q, nil, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head", bundle, "+"+ref+":"+ref); err != nil {
		return err
	}
	got, err := Git(ctx, q, nil, "rev-parse", "--verify", "-q", ref+"^{commit}")
	if err != nil || got != commit {
		return fmt.Errorf("the bundle's %s is %q, not the run's commit %s", ref, got, commit)
	}
	parents, err := Git(ctx, q, nil, "rev-list", "--parents", "-n", "1", commit)
	if err != nil || parents != commit+" "+base {
		return fmt.Errorf("commit %s does not have the base %s as its only parent", short(commit), short(base))
	}
	index := []string{"GIT_INDEX_FILE=" + filepath.Join(filepath.Dir(q), "index")}
	if _, err := Git(ctx, q, index, "read-tree", base); err != nil {
		return err
	}
	if _, err := Git(ctx, q, index, "apply", "--cached", "--binary", patch); err != nil {
		return fmt.Errorf("the run's patch does not apply to its base: %v", err)
	}
	tree, err := Git(ctx, q, index, "write-tree")
	if err != nil {
		return err
	}
	want, err := Git(ctx, q, nil, "rev-parse", commit+"^{tree}")
	if err != nil || tree != want {
		return fmt.Errorf("the tree of commit %s is not the base with the run's patch", short(commit))
	}
	return nil
}
