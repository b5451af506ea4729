package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NewCheckout returns the plain checkout Provider: each workspace is a new
// git repository that holds only the objects of the base commit (a shallow
// copy streamed from the user's repository: no hard links, no alternates),
// with HEAD detached at the commit and the tree checked out.
//
// The checkout writes blob bytes as they are: the workspace's
// .git/info/attributes turns off eol conversion, filters and ident for every
// path, so "unchanged" means byte-identical to the base blob and the
// export (which stores raw bytes) never records a conversion as a change.
func NewCheckout() Provider { return checkoutProvider{} }

type checkoutProvider struct{}

// rawAttributes neutralizes checkout conversions in the workspace.
const rawAttributes = "* -text -filter -ident -working-tree-encoding\n"

// Create implements Provider.
func (checkoutProvider) Create(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error) {
	return makeWorkspace(ctx, repo, commit, dir, stateDir, false, populate)
}

// Fill implements Filler.
func (checkoutProvider) Fill(ctx context.Context, repo, commit, dir, stateDir string) (Workspace, error) {
	return makeWorkspace(ctx, repo, commit, dir, stateDir, true, populate)
}

// populateFunc fills the empty directory dir with the checkout of commit
// from repo, with its shallow .git (populate, or a copy of a cached one).
type populateFunc func(ctx context.Context, repo, commit, format, dir string) error

// makeWorkspace is Create (dir must not exist) or Fill (dir must be an
// empty directory), filled by pop.
func makeWorkspace(ctx context.Context, repo, commit, dir, stateDir string, fill bool, pop populateFunc) (Workspace, error) {
	format, dir, stateDir, err := checkCreate(commit, dir, stateDir)
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	if fill {
		if err := checkEmptyDir(dir); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
	}
	ws, err := create(ctx, repo, commit, format, dir, stateDir, pop)
	if err != nil {
		// dir was not there, or empty, before: leave nothing half made.
		if fill {
			emptyDir(dir)
		} else {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("create workspace %s: %w", dir, err)
	}
	return ws, nil
}

// checkEmptyDir refuses anything but an empty directory (a symlink too).
func checkEmptyDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

// emptyDir removes what is inside dir (never following a symlink).
func emptyDir(dir string) {
	names, _ := dirNames(dir)
	for _, n := range names {
		_ = os.RemoveAll(filepath.Join(dir, n))
	}
}

// dirNames lists the names in directory dir.
func dirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func create(ctx context.Context, repo, commit, format, dir, stateDir string, pop populateFunc) (Workspace, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	if err := pop(ctx, repo, commit, format, dir); err != nil {
		return nil, err
	}
	m, err := recordManifest(ctx, dir, commit, format)
	if err != nil {
		return nil, err
	}
	if err := writeManifest(stateDir, m); err != nil {
		return nil, err
	}
	return &checkoutWorkspace{dir: dir, stateDir: stateDir, m: m}, nil
}

// Open implements Provider.
func (checkoutProvider) Open(_ context.Context, dir, stateDir string) (Workspace, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open workspace: %s is not a directory", dir)
	}
	m, err := readManifest(stateDir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	return &checkoutWorkspace{dir: dir, stateDir: stateDir, m: m}, nil
}

// populate makes dir a repository with the commit's objects and checks it
// out. It runs before the agent has the directory.
//
// The copy of the objects and the checkout run at once: the checkout
// reads the objects from the user's repository (named to that one git
// process as an alternate object store, never written into the new
// repository, which holds no alternates), while the copy streams them
// into the new repository.
func populate(ctx context.Context, repo, commit, format, dir string) error {
	if err := initRepo(ctx, dir, format); err != nil {
		return err
	}
	gitDir := filepath.Join(dir, ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "info"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gitDir, "info", "attributes"), []byte(rawAttributes), 0o644); err != nil {
		return err
	}
	// The commit's parents are not copied: mark it shallow, detach HEAD.
	if err := os.WriteFile(filepath.Join(gitDir, "shallow"), []byte(commit+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gitDir, "HEAD"), []byte(commit+"\n"), 0o644); err != nil {
		return err
	}
	objects := objectDir(ctx, repo)
	if objects == "" { // not to be named in the variable: one after the other
		if err := copyObjects(ctx, repo, commit, dir); err != nil {
			return err
		}
		return checkoutTree(ctx, dir, commit, "")
	}
	copied := make(chan error, 1)
	go func() { copied <- copyObjects(ctx, repo, commit, dir) }()
	err := checkoutTree(ctx, dir, commit, objects)
	return errors.Join(<-copied, err)
}

// checkoutTree checks out commit in dir, reading objects from dir's
// repository and from the object directory alternate ("" for none).
func checkoutTree(ctx context.Context, dir, commit, alternate string) error {
	// Parallel checkout: writing many small files is bound by file system
	// latency more than by CPU, so use more workers than cores (git applies
	// it only past 100 files).
	workers := "checkout.workers=" + strconv.Itoa(max(4, runtime.NumCPU()))
	var env []string
	if alternate != "" {
		env = []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + alternate}
	}
	_, err := gitCmd{dir: dir, args: []string{"-c", workers, "read-tree", "-u", "--reset", commit}, env: env}.run(ctx)
	return err
}

// objectDir is the object directory of the user's repository repo, for
// GIT_ALTERNATE_OBJECT_DIRECTORIES; "" when its name cannot be put there
// as it is (a colon separates names there, a quote starts a quoted one).
func objectDir(ctx context.Context, repo string) string {
	_, common, ok := gitDirs(repo) // the usual layouts, without asking git
	dir := filepath.Join(common, "objects")
	if !ok {
		out, err := git(ctx, repo, "rev-parse", "--path-format=absolute", "--git-path", "objects")
		if err != nil {
			return ""
		}
		dir = out
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || strings.ContainsAny(dir, ":\"\n") {
		return ""
	}
	return dir
}

// initRepo makes dir/.git an empty repository of the object format. On
// Linux it writes what `git init --template=` would (the configuration git
// would probe there is fixed: file modes kept, case-sensitive names)
// instead of starting a process; elsewhere it asks git, which probes the
// file system.
func initRepo(ctx context.Context, dir, format string) error {
	if runtime.GOOS != "linux" {
		_, err := git(ctx, dir, "-c", "init.defaultBranch=agentrun", "init", "-q", "--template=", "--object-format="+format)
		return err
	}
	gitDir := filepath.Join(dir, ".git")
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return err
		}
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	if format != "sha1" {
		config = strings.Replace(config, "repositoryformatversion = 0", "repositoryformatversion = 1", 1) +
			"[extensions]\n\tobjectformat = " + format + "\n"
	}
	if err := os.WriteFile(filepath.Join(gitDir, "config"), []byte(config), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(gitDir, "HEAD"), []byte("ref: refs/heads/agentrun\n"), 0o644)
}

// copyObjects streams the objects of commit (not its history) from repo
// into dir's object store: pack-objects in repo (the commit marked shallow,
// so the walk stops there) piped into index-pack in dir. New objects are not
// delta-compressed (local copy, speed first); deltas already in repo's packs
// are reused. The pack is not fsynced: like the checked-out files (which git
// never syncs), it is durable only after the kernel's writeback, and a
// workspace lost to a crash in that window is made again from the base.
func copyObjects(ctx context.Context, repo, commit, dir string) error {
	pack := gitCmd{dir: repo, args: []string{"pack-objects", "--revs", "--stdout", "-q", "--window=0", "--compression=1"},
		stdin: strings.NewReader("--shallow " + commit + "\n" + commit + "\n")}.command(ctx)
	index := gitCmd{dir: dir, args: []string{"-c", "core.fsync=none", "index-pack", "--stdin"}}.command(ctx)
	cmds := []*exec.Cmd{pack, index}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	pack.Stdout, index.Stdin = w, r
	stderrs := make([]bytes.Buffer, len(cmds))
	for i, c := range cmds {
		c.Stderr = &stderrs[i]
	}
	index.Stdout = &bytes.Buffer{}
	started := 0
	var startErr error
	for _, c := range cmds {
		if startErr = c.Start(); startErr != nil {
			break
		}
		started++
	}
	_ = r.Close()
	_ = w.Close()
	var errs []error
	if startErr != nil {
		errs = append(errs, startErr)
	}
	for i := range started {
		if err := cmds[i].Wait(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, &gitError{args: cmds[i].Args[len(safetyConfig)+1:], stderr: stderrs[i].String(), err: err})
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("copy objects of %s: %w", commit, errors.Join(errs...))
	}
	return nil
}

// recordManifest lists the checked-out index and stats every file. It runs
// before the agent has the directory.
func recordManifest(ctx context.Context, dir, commit, format string) (*manifest, error) {
	hashLen := 20
	if format == "sha256" {
		hashLen = 32
	}
	var entries []entry
	var ids map[string]string
	data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err == nil {
		entries, ids, err = parseIndex(data, hashLen)
	}
	if err != nil { // an index format we do not read: ask git
		if entries, err = lsFiles(ctx, dir); err != nil {
			return nil, err
		}
	}
	m := &manifest{format: format, commit: commit, entries: entries, trees: buildTrees(entries, ids, format)}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(root) }()
	for i := range m.entries {
		e := &m.entries[i]
		if e.mode == modeGitlink {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(root, e.path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, fmt.Errorf("stat %s: %w", e.path, err)
		}
		fillStat(e, &st)
	}
	return m, nil
}

// lsFiles lists the index with git ls-files.
func lsFiles(ctx context.Context, dir string) ([]entry, error) {
	out, err := gitCmd{dir: dir, args: []string{"ls-files", "-s", "-z"}}.run(ctx)
	if err != nil {
		return nil, err
	}
	entries := make([]entry, 0, bytes.Count(out, []byte{0}))
	for len(out) > 0 {
		rec, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("ls-files: truncated output")
		}
		out = rest
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("ls-files: unexpected record %q", rec)
		}
		mode, err := strconv.ParseUint(f[0], 8, 32)
		if err != nil {
			return nil, fmt.Errorf("ls-files: unexpected mode %q", f[0])
		}
		entries = append(entries, entry{path: string(path), mode: uint32(mode), blob: f[1]})
	}
	return entries, nil
}

// fillStat copies the stat data Scan compares.
func fillStat(e *entry, st *unix.Stat_t) {
	e.size = st.Size
	e.mtime = stamp{int64(st.Mtim.Sec), int64(st.Mtim.Nsec)}
	e.ctime = stamp{int64(st.Ctim.Sec), int64(st.Ctim.Nsec)}
	e.ino = uint64(st.Ino)
}

// checkoutWorkspace is a workspace made by the plain checkout.
type checkoutWorkspace struct {
	dir, stateDir string
	m             *manifest
}

func (w *checkoutWorkspace) Dir() string { return w.dir }

// Scan implements Workspace.
func (w *checkoutWorkspace) Scan(ctx context.Context, lim Limits) (*ChangeSet, error) {
	cs, err := scan(ctx, w.dir, w.m, lim)
	if err == nil {
		cs.base = &exportBase{format: w.m.format, commit: w.m.commit, treesDir: w.stateDir}
	}
	return cs, err
}
