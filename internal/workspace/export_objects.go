package workspace

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The export writes the result's objects itself, as loose objects in the
// user's repository, when it can build them exactly: no git process for
// them, where fast-import (and the unpack-objects it hands a small import
// to) cost two processes in a row before the branch could move. git's
// loose object format is a header and the content, zlib-compressed, named
// by their hash; what takes care is the trees:
//
//   - The base's trees come from what Create recorded before the agent
//     had the directory: the tree object of every directory, rebuilt
//     from the checkout's index and checked against the tree ids git
//     wrote in the index's cache-tree (trees.go).
//   - Only the directories on a changed path are built again; every
//     other one is named by its id. A base tree is used only once it
//     hashes to its id, so the result is the one fast-import would write;
//     the export asks fast-import when a tree on a changed path is not
//     recorded (a mode the index canonicalized, a damaged record, a layer
//     made before this record existed).
//   - The changes are applied as fast-import applies them: deletions
//     first, a file where a directory is to be replaced by it (and the
//     other way round), a directory left empty dropped.
//
// The repository's layout decides too: the export writes only into a
// repository's own object directory (a linked worktree's is its common
// directory's), and asks git where a configuration could ask for more
// than git's defaults for loose objects (shared permissions, fsync) or
// could include one that does.

// exportBase is what a scan hands the export of the base it compared
// the workspace with.
type exportBase struct {
	format, commit string
	treesDir       string // where the trees file is
}

// errAskGit says the export cannot build the objects itself; fast-import
// does.
var errAskGit = errors.New("the objects are left to git")

// modeTree is a directory's mode in a tree.
const modeTree uint32 = 0o40000

// object is one loose object to write.
type object struct {
	id, kind string
	data     []byte
}

// treeNode is a directory this export changes: its entries by name.
type treeNode struct{ entries map[string]*treeEntry }

// treeEntry is one entry of a directory: a directory this export changes
// has node set and its id empty until it is hashed.
type treeEntry struct {
	mode uint32
	id   string
	node *treeNode
}

// treeBuilder builds the result's trees from the base's records.
type treeBuilder struct {
	trees   *baseTrees
	objects []object
	ids     map[string]bool // objects already listed
}

// buildObjects builds the blobs, trees and commit of the export of
// changes onto base (the commit, author and committer header lines in
// who), and names the commit's, its tree's and the base tree's ids.
// errAskGit when the base's records do not allow it.
func buildObjects(base *exportBase, changes []Change, who, msg string) ([]object, imported, error) {
	if base == nil {
		return nil, imported{}, errAskGit
	}
	trees, err := readTrees(base.treesDir, base.format, base.commit)
	if err != nil {
		return nil, imported{}, fmt.Errorf("%w: %v", errAskGit, err)
	}
	b := &treeBuilder{trees: trees, ids: map[string]bool{}}
	baseTree, _, _ := trees.tree("")
	root, err := b.load("")
	if err != nil {
		return nil, imported{}, err
	}
	for _, c := range changes { // deletions first: a file may become a directory
		if c.Kind == "delete" {
			if err := b.apply(root, c); err != nil {
				return nil, imported{}, err
			}
		}
	}
	for _, c := range changes {
		if c.Kind != "delete" {
			if err := b.apply(root, c); err != nil {
				return nil, imported{}, err
			}
		}
	}
	tree := b.hashTree(root)
	commit := b.add("commit", fmt.Appendf(nil, "tree %s\nparent %s\n%s\n\n%s", tree, base.commit, who, msg))
	return b.objects, imported{commit: commit, tree: tree, baseTree: baseTree}, nil
}

// load is the base's directory dir ("" for the root), from its tree
// object as Create recorded it, checked against its id.
func (b *treeBuilder) load(dir string) (*treeNode, error) {
	_, content, ok := b.trees.tree(dir)
	if !ok || content == nil {
		return nil, fmt.Errorf("%w: no usable tree recorded for %q", errAskGit, dir)
	}
	n := &treeNode{entries: map[string]*treeEntry{}}
	for len(content) > 0 {
		sp := bytes.IndexByte(content, ' ')
		nul := bytes.IndexByte(content, 0)
		if sp <= 0 || nul < sp || len(content)-nul-1 < b.trees.hashLen {
			return nil, fmt.Errorf("%w: a damaged tree for %q", errAskGit, dir)
		}
		mode, err := strconv.ParseUint(string(content[:sp]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: a damaged tree for %q", errAskGit, dir)
		}
		n.entries[string(content[sp+1:nul])] = &treeEntry{mode: uint32(mode), id: hex.EncodeToString(content[nul+1 : nul+1+b.trees.hashLen])}
		content = content[nul+1+b.trees.hashLen:]
	}
	runtime.KeepAlive(b.trees) // content is in its mapping
	return n, nil
}

// apply applies one change to the tree under root.
func (b *treeBuilder) apply(root *treeNode, c Change) error {
	parts := strings.Split(c.Path, "/")
	n, dir := root, ""
	for _, name := range parts[:len(parts)-1] {
		dir = joinPath(dir, name)
		e := n.entries[name]
		switch {
		case e == nil || e.mode != modeTree:
			if c.Kind == "delete" {
				return nil // nothing there to delete
			}
			// A new directory, or one where a file was: fast-import
			// replaces the file.
			e = &treeEntry{mode: modeTree, node: &treeNode{entries: map[string]*treeEntry{}}}
			n.entries[name] = e
		case e.node == nil:
			node, err := b.load(dir)
			if err != nil {
				return err
			}
			e.node = node
		}
		e.id = "" // hashed again
		n = e.node
	}
	name := parts[len(parts)-1]
	if c.Kind == "delete" {
		delete(n.entries, name)
		return nil
	}
	n.entries[name] = &treeEntry{mode: c.Mode, id: b.add("blob", c.Content)}
	return nil
}

// hashTree lists the tree objects of n and of the directories it
// changes, and returns n's id. A changed directory left empty is dropped
// from its parent, as git keeps no empty directory (the root alone may
// be empty).
func (b *treeBuilder) hashTree(n *treeNode) string {
	b.hashChanged(n)
	data, _ := encodeTree(n) // every id here is one this export made or checked
	return b.add("tree", data)
}

// hashChanged hashes the changed directories under n, dropping the empty
// ones.
func (b *treeBuilder) hashChanged(n *treeNode) {
	for name, e := range n.entries {
		if e.node == nil || e.id != "" {
			continue
		}
		if b.hashChanged(e.node); len(e.node.entries) == 0 {
			delete(n.entries, name)
			continue
		}
		data, _ := encodeTree(e.node)
		e.id = b.add("tree", data)
	}
}

// encodeTree is the content of the tree object of n: its entries in
// git's order (a directory's name compared as if it ended in '/'), each
// "<octal mode> <name>\0<raw id>".
func encodeTree(n *treeNode) ([]byte, error) {
	type keyed struct {
		key, name string
		e         *treeEntry
	}
	ents := make([]keyed, 0, len(n.entries))
	size := 0
	for name, e := range n.entries {
		k := keyed{key: name, name: name, e: e}
		if e.mode == modeTree {
			k.key = name + "/"
		}
		ents = append(ents, k)
		size += len(name) + 8 + len(e.id)/2
	}
	slices.SortFunc(ents, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	buf := make([]byte, 0, size)
	for _, k := range ents {
		raw, err := hex.DecodeString(k.e.id)
		if err != nil || len(raw) == 0 {
			return nil, fmt.Errorf("%w: entry %q has no id", errAskGit, k.name)
		}
		buf = appendTreeEntry(buf, k.e.mode, k.name, raw)
	}
	return buf, nil
}

// add lists an object to write and returns its id.
func (b *treeBuilder) add(kind string, data []byte) string {
	id := objectID(b.trees.newHash, kind, data)
	if !b.ids[id] {
		b.ids[id] = true
		b.objects = append(b.objects, object{id: id, kind: kind, data: data})
	}
	return id
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// writeLoose writes the objects into the object directory objDir, each
// as git writes a loose object: compressed into a temporary file (mode
// 0444) in its fan-out directory, then linked to its name. An object
// already there is freshened instead, as git does: its time is now, so
// that a `git prune --expire` at the same time (the user's gc, an agent
// host's tidy of its cache) does not take an object the branch is about
// to name because nothing named it before. Like git, it does not sync
// them (git syncs loose objects only when configured to, and such a
// configuration sends the export to git: looseObjectDir).
func writeLoose(objDir string, objects []object) error {
	var zw *zlib.Writer
	for _, o := range objects {
		dir := filepath.Join(objDir, o.id[:2])
		path := filepath.Join(dir, o.id[2:])
		if _, err := os.Lstat(path); err == nil {
			now := time.Now()
			_ = os.Chtimes(path, now, now) // one not ours to touch stays as it is
			continue
		}
		if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write object %s: %w", o.id, err)
		}
		f, err := os.CreateTemp(dir, "tmp_obj_")
		if err != nil {
			return fmt.Errorf("write object %s: %w", o.id, err)
		}
		werr := writeObject(f, &zw, o)
		if err := f.Chmod(0o444); werr == nil {
			werr = err
		}
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr == nil {
			if err := os.Link(f.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
				werr = os.Rename(f.Name(), path) // a file system without hard links
			}
		}
		_ = os.Remove(f.Name())
		if werr != nil {
			return fmt.Errorf("write object %s: %w", o.id, werr)
		}
	}
	return nil
}

// storedMax is the largest object (header included) written as a zlib
// stream of stored blocks, uncompressed, as git writes every loose object
// with core.looseCompression=0. A flate compressor's state is about
// 850 KB, which a commit of 250 bytes paid for on every export: 4-19 ms
// on a machine where a page fault costs 15-20 us. Larger objects are
// compressed at git's default level (the fastest), where the saving on
// disk is worth that cost. Packing (git gc) compresses them all.
const storedMax = 32 << 10

// writeObject writes o's loose object, its header and data compressed,
// to w; *zw is the compressor, made on first use and reused.
func writeObject(w io.Writer, zw **zlib.Writer, o object) error {
	header := o.kind + " " + strconv.Itoa(len(o.data)) + "\x00"
	if len(header)+len(o.data) <= storedMax {
		_, err := w.Write(storedZlib(append([]byte(header), o.data...)))
		return err
	}
	if *zw == nil {
		*zw, _ = zlib.NewWriterLevel(w, zlib.BestSpeed)
	} else {
		(*zw).Reset(w)
	}
	_, err := io.WriteString(*zw, header)
	if err == nil {
		_, err = (*zw).Write(o.data)
	}
	if cerr := (*zw).Close(); err == nil {
		err = cerr
	}
	return err
}

// storedZlib is raw as a zlib stream (RFC 1950) whose deflate data are
// stored blocks (RFC 1951 3.2.4: BTYPE 00), each at most 65535 bytes: the
// header says the fastest level, and the Adler-32 of raw ends it.
func storedZlib(raw []byte) []byte {
	sum := adler32.Checksum(raw)
	out := make([]byte, 0, len(raw)+2+5*(len(raw)/0xffff+1)+4)
	out = append(out, 0x78, 0x01)
	for final := false; !final; {
		n := min(len(raw), 0xffff)
		final = n == len(raw)
		bfinal := byte(0)
		if final {
			bfinal = 1
		}
		out = append(out, bfinal, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
		out = append(out, raw[:n]...)
		raw = raw[n:]
	}
	return binary.BigEndian.AppendUint32(out, sum)
}

// looseObjectDir is the object directory the export may write loose
// objects into: the repository's own .git/objects (a bare repository's
// objects) or, for a linked worktree, its common directory's. It is ""
// (the export asks git) for any other layout, for an object directory
// whose group may write (a shared repository), and where a configuration
// file git reads (or one it includes) mentions shared permissions or
// fsync: a loose object is then not what git's defaults make it.
func looseObjectDir(repo string) string {
	gitDir, common, ok := gitDirs(repo)
	if !ok {
		return ""
	}
	objects := filepath.Join(common, "objects")
	if fi, err := os.Stat(objects); err != nil || !fi.IsDir() || fi.Mode()&(0o020|fs.ModeSetgid) != 0 {
		return ""
	}
	if _, err := os.Stat(filepath.Join(common, "config")); err != nil {
		return "" // not a repository git would know as one
	}
	files := append(userConfigFiles(), filepath.Join(common, "config"), filepath.Join(gitDir, "config.worktree"))
	if configMentions(files, "sharedrepository", "fsync") {
		return ""
	}
	return objects
}

// gitDirs finds, without asking git, the git directory of the working
// tree repo (its .git, or the one its .git file names for a linked
// worktree; repo itself for a bare repository) and the common directory
// (where the objects are: the git directory itself, or the one its
// commondir names). ok is false for any other layout.
func gitDirs(repo string) (gitDir, common string, ok bool) {
	gitDir = filepath.Join(repo, ".git")
	fi, err := os.Lstat(gitDir)
	if errors.Is(err, fs.ErrNotExist) && isBare(repo) {
		return repo, repo, true
	}
	if err != nil {
		return "", "", false
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(gitDir)
		dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if err != nil || !ok || dir == "" {
			return "", "", false
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(repo, dir)
		}
		gitDir = dir
	}
	common = gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		if common = strings.TrimSpace(string(b)); !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	return gitDir, common, true
}

// isBare reports that dir is a bare repository as git init --bare makes
// one (an agent host's cache of a project): HEAD, objects and refs in it,
// and its configuration says core.bare = true.
func isBare(dir string) bool {
	for _, name := range []string{"objects", "refs"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
			return false
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.EqualFold(strings.TrimSpace(k), "bare") && strings.EqualFold(strings.TrimSpace(v), "true") {
			return true
		}
	}
	return false
}

// configMentions reports a configuration file among files, or among the
// files they include (followed whatever the condition of an includeIf,
// at most 32 files in all), that holds one of words in any case. A file
// that cannot be read is one git would not read either.
func configMentions(files []string, words ...string) bool {
	for seen := 0; len(files) > 0 && seen < 32; seen++ {
		f := files[0]
		files = files[1:]
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lower := bytes.ToLower(b)
		for _, w := range words {
			if bytes.Contains(lower, []byte(w)) {
				return true
			}
		}
		if !bytes.Contains(lower, []byte("include")) {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(k), "path") {
				continue
			}
			p := strings.Trim(strings.TrimSpace(v), `"`)
			if rest, ok := strings.CutPrefix(p, "~/"); ok {
				p = filepath.Join(os.Getenv("HOME"), rest)
			} else if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(f), p)
			}
			files = append(files, p)
		}
	}
	return len(files) > 0 // more includes than followed: ask git
}

// userConfigFiles are the system and global configuration files git
// reads (see gitEnv: the variables that name them are passed through).
func userConfigFiles() []string {
	var files []string
	if os.Getenv("GIT_CONFIG_NOSYSTEM") == "" {
		if f := os.Getenv("GIT_CONFIG_SYSTEM"); f != "" {
			files = append(files, f)
		} else {
			files = append(files, "/etc/gitconfig")
		}
	}
	if f := os.Getenv("GIT_CONFIG_GLOBAL"); f != "" {
		return append(files, f)
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		files = append(files, filepath.Join(x, "git", "config"))
	} else if h := os.Getenv("HOME"); h != "" {
		files = append(files, filepath.Join(h, ".config", "git", "config"))
	}
	if h := os.Getenv("HOME"); h != "" {
		files = append(files, filepath.Join(h, ".gitconfig"))
	}
	return files
}
