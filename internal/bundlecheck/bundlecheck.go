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
	out, err := Git(ctx, repo, nil, "rev-parse", "--path-format=absolute", "--git-common-dir", "--show-object-format")
	if err != nil {
		return err
	}
	common, format, ok := strings.Cut(out, "\n")
	if !ok {
		return fmt.Errorf("git rev-parse in %s answered %q", repo, out)
	}
	return BorrowingObjects(filepath.Join(common, "objects"), strings.TrimSpace(format), dir, "")
}

// BorrowingObjects makes a bare repository at dir, of object format
// ("sha1" or "sha256"), whose objects include those of the object
// directory objects (read-only, through objects/info/alternates). It
// writes what git init --bare --template= writes, without a git process:
// a quarantine is made for every upload and every submit.
//
// A fetch into it checks that what it fetched connects to what the
// borrowed repository's refs reach, and names every one of those refs to
// git rev-list: a team server's project holds a branch per run, so that
// check grows with the runs (0.36 s against 0.10 s at 3,000 branches, on
// a loaded machine). Where stopAt is not "", only the borrowed refs under
// that prefix are named (core.alternateRefsPrefixes): the check then
// walks on past the others' commits, which is slower only for history
// that no ref under stopAt reaches, and as strict.
func BorrowingObjects(objects, format, dir, stopAt string) error {
	version, extensions := "0", ""
	switch format {
	case "sha1":
	case "sha256":
		version, extensions = "1", "[extensions]\n\tobjectformat = sha256\n"
	default:
		return fmt.Errorf("object format %q is neither sha1 nor sha256", format)
	}
	config := "[core]\n\trepositoryformatversion = " + version + "\n\tfilemode = true\n\tbare = true\n"
	if stopAt != "" {
		if strings.ContainsAny(stopAt, "\n\"\\ ") {
			return fmt.Errorf("ref prefix %q", stopAt)
		}
		config += "\talternateRefsPrefixes = " + stopAt + "\n"
	}
	config += extensions
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for name, content := range map[string]string{"HEAD": "ref: refs/heads/main\n", "config": config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if objects == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "objects", "info", "alternates"), []byte(objects+"\n"), 0o600)
}

// FormatOf is the object format of a full object id: "sha1" for 40 hex
// digits, "sha256" for 64.
func FormatOf(id string) string {
	if len(id) == 64 {
		return "sha256"
	}
	return "sha1"
}

// Migrate moves the objects a quarantine q fetched (loose objects and
// packs, not its alternates) into the object directory objects, as git
// moves a push's quarantined objects into its repository: each file is
// linked under its name (one already there is the same object), a pack
// before its reverse index and its index, so that no index ever names a
// pack that is not there. Like git, it does not sync them. The objects
// were checked (fsck, connectivity against objects) when q fetched them;
// nothing removes objects from the directories this is used on.
func Migrate(q, objects string) error {
	src := filepath.Join(q, "objects")
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case !e.IsDir():
		case len(name) == 2 && isHex(name):
			files, err := os.ReadDir(filepath.Join(src, name))
			if err != nil {
				return err
			}
			for _, f := range files {
				if !isHex(f.Name()) {
					continue
				}
				if err := linkObject(filepath.Join(src, name, f.Name()), filepath.Join(objects, name), f.Name()); err != nil {
					return err
				}
			}
		case name == "pack":
			files, err := os.ReadDir(filepath.Join(src, name))
			if err != nil {
				return err
			}
			for _, ext := range []string{".pack", ".rev", ".idx"} {
				for _, f := range files {
					if strings.HasPrefix(f.Name(), "pack-") && strings.HasSuffix(f.Name(), ext) {
						if err := linkObject(filepath.Join(src, name, f.Name()), filepath.Join(objects, name), f.Name()); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

func linkObject(from, dir, name string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Link(from, filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Check fetches ref of bundle into the quarantine q (see Borrowing) and
// checks that it is commit, whose only parent is base and whose tree is
// base's with patch applied. The fetch verifies the bundle (its header
// and that its prerequisites are there) and checks every object it brings.
func Check(ctx context.Context, q, bundle, patch, ref, commit, base string) error {
	if _, err := Git(ctx, q, nil, "-c", "fetch.fsckObjects=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head", bundle, "+"+ref+":"+ref); err != nil {
		return err
	}
	// One rev-parse: the ref's commit, the commit's tree, its parents
	// (no argument can start with a dash: ref is refs/..., commit an id).
	out, err := Git(ctx, q, nil, "rev-parse", ref+"^{commit}", commit+"^{tree}", commit+"^@")
	lines := strings.Split(out, "\n")
	if err != nil || len(lines) < 2 || lines[0] != commit {
		got := ""
		if err == nil {
			got = lines[0]
		}
		return fmt.Errorf("the bundle's %s is %q, not the run's commit %s", ref, got, commit)
	}
	want, parents := lines[1], lines[2:]
	if len(parents) != 1 || parents[0] != base {
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
	if tree != want {
		return fmt.Errorf("the tree of commit %s is not the base with the run's patch", short(commit))
	}
	return nil
}
