package workspace

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// treesName is the file, beside a manifest, of the base commit's tree
// objects, which an export builds its trees on (export_objects.go). It is
// written with the manifest and not synced: every tree in it is checked
// against its id when it is read, and a file that is missing, torn or of
// another commit makes the export ask git instead.
const treesName = "workspace-trees"

const treesMagic = "agentrun-workspace-trees 1"

// treeRec is one directory of the base ("" is the root): its tree id
// and, when rebuilt from the index to the same id, its tree object's
// content (nil when not: a mode the index canonicalized, say).
type treeRec struct {
	path, id string
	content  []byte
}

// buildTrees rebuilds the tree object of every directory of entries (a
// checkout's index, in path order) and checks each against its id in
// ids (the index's cache-tree). A directory that rebuilds to another id
// keeps its id with no content; the trees above it name it by its id.
// It is nil without ids, or when ids lacks a directory.
func buildTrees(entries []entry, ids map[string]string, format string) []treeRec {
	if ids == nil {
		return nil
	}
	newHash := objectHash(format)
	type open struct {
		path string
		buf  []byte
	}
	var recs []treeRec
	stack := []*open{{path: ""}}
	failed := false
	closeTop := func() {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		id, ok := ids[d.path]
		if !ok {
			failed = true
			return
		}
		rec := treeRec{path: d.path, id: id}
		if objectID(newHash, "tree", d.buf) == id {
			rec.content = d.buf
		}
		recs = append(recs, rec)
		if len(stack) > 0 {
			raw, _ := hex.DecodeString(id)
			stack[len(stack)-1].buf = appendTreeEntry(stack[len(stack)-1].buf, modeTree, d.path[strings.LastIndexByte(d.path, '/')+1:], raw)
		}
	}
	for i := range entries {
		e := &entries[i]
		dir, name := "", e.path
		if j := strings.LastIndexByte(e.path, '/'); j >= 0 {
			dir, name = e.path[:j], e.path[j+1:]
		}
		for top := stack[len(stack)-1].path; top != dir && !strings.HasPrefix(dir, top+"/") && top != ""; top = stack[len(stack)-1].path {
			closeTop()
		}
		for top := stack[len(stack)-1].path; top != dir; top = stack[len(stack)-1].path {
			rest := dir
			if top != "" {
				rest = dir[len(top)+1:]
			}
			first, _, _ := strings.Cut(rest, "/")
			stack = append(stack, &open{path: joinPath(top, first)})
		}
		raw, err := hex.DecodeString(e.blob)
		if err != nil {
			return nil
		}
		stack[len(stack)-1].buf = appendTreeEntry(stack[len(stack)-1].buf, e.mode, name, raw)
	}
	for len(stack) > 0 {
		closeTop()
	}
	if failed {
		return nil
	}
	slices.SortFunc(recs, func(a, b treeRec) int { return strings.Compare(a.path, b.path) })
	return recs
}

// appendTreeEntry appends one entry of a tree object: "<octal mode>
// <name>\0<raw id>".
func appendTreeEntry(buf []byte, mode uint32, name string, raw []byte) []byte {
	buf = strconv.AppendUint(buf, uint64(mode), 8)
	buf = append(buf, ' ')
	buf = append(buf, name...)
	buf = append(buf, 0)
	return append(buf, raw...)
}

// objectHash is the hash of the object format ("sha1" or "sha256").
func objectHash(format string) func() hash.Hash {
	if format == "sha256" {
		return sha256.New
	}
	return sha1.New
}

// objectID is the id of an object of kind with data.
func objectID(newHash func() hash.Hash, kind string, data []byte) string {
	h := newHash()
	h.Write(strconv.AppendInt(append([]byte(kind), ' '), int64(len(data)), 10))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// writeTrees writes recs (sorted by path) into dir: a header line
// (format, commit, count), a table of the records' offsets (8 bytes
// each, little-endian, from the end of the table), then per record its
// path's length (4 bytes) and path, its id (raw) and its content's
// length (4 bytes; 0xffffffff for none) and content.
func writeTrees(dir, format, commit string, recs []treeRec) error {
	data := fmt.Appendf(nil, "%s %s %s %d\n", treesMagic, format, commit, len(recs))
	table := len(data)
	data = append(data, make([]byte, 8*len(recs))...)
	start := len(data)
	for i, r := range recs {
		binary.LittleEndian.PutUint64(data[table+8*i:], uint64(len(data)-start))
		data = binary.LittleEndian.AppendUint32(data, uint32(len(r.path)))
		data = append(data, r.path...)
		var err error
		if data, err = hex.AppendDecode(data, []byte(r.id)); err != nil {
			return fmt.Errorf("write trees: %s: %w", r.path, err)
		}
		if r.content == nil {
			data = binary.LittleEndian.AppendUint32(data, noContent)
			continue
		}
		data = binary.LittleEndian.AppendUint32(data, uint32(len(r.content)))
		data = append(data, r.content...)
	}
	tmp, err := os.CreateTemp(dir, treesName+".tmp*")
	if err != nil {
		return fmt.Errorf("write trees: %w", err)
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(dir, treesName))
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write trees: %w", werr)
	}
	return nil
}

const noContent = 0xffffffff

// baseTrees are a base's tree objects, read in place from the mapped
// trees file; a tree is checked against its id when it is looked up.
type baseTrees struct {
	table, recs []byte
	n, hashLen  int
	newHash     func() hash.Hash
}

var errNoTrees = errors.New("no usable record of the base's trees")

// readTrees maps the trees file in dir, recorded for commit in the
// object format; errNoTrees (wrapped) when there is none, or one that is
// damaged or names another base.
func readTrees(dir, format, commit string) (*baseTrees, error) {
	f, err := os.Open(filepath.Join(dir, treesName))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoTrees, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 || int64(int(fi.Size())) != fi.Size() {
		return nil, fmt.Errorf("%w: %v", errNoTrees, err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoTrees, err)
	}
	head, rest, ok := bytes.Cut(data, []byte{'\n'})
	fs := strings.Fields(string(head))
	t := &baseTrees{hashLen: len(commit) / 2, newHash: objectHash(format)}
	if ok && len(fs) == 5 && fs[0]+" "+fs[1] == treesMagic && fs[2] == format && fs[3] == commit {
		t.n, err = strconv.Atoi(fs[4])
	}
	if t.n <= 0 || err != nil || t.n > len(rest)/8 {
		err := fmt.Errorf("%w: header %q", errNoTrees, head) // before head is unmapped
		_ = unix.Munmap(data)
		return nil, err
	}
	t.table, t.recs = rest[:8*t.n], rest[8*t.n:]
	runtime.AddCleanup(t, func(b []byte) { _ = unix.Munmap(b) }, data)
	return t, nil
}

// record reads the i-th record: path, raw id, content (nil for none);
// ok false when it is damaged.
func (t *baseTrees) record(i int) (path string, id, content []byte, ok bool) {
	off := binary.LittleEndian.Uint64(t.table[8*i:])
	if off > uint64(len(t.recs)) || uint64(len(t.recs))-off < 4 {
		return "", nil, nil, false
	}
	b := t.recs[off:]
	pl := int(binary.LittleEndian.Uint32(b))
	if pl > len(b)-4-t.hashLen-4 {
		return "", nil, nil, false
	}
	path, b = string(b[4:4+pl]), b[4+pl:]
	id, b = b[:t.hashLen], b[t.hashLen:]
	cl := binary.LittleEndian.Uint32(b)
	if cl == noContent {
		return path, id, nil, true
	}
	if int64(cl) > int64(len(b)-4) {
		return "", nil, nil, false
	}
	return path, id, b[4 : 4+cl], true
}

// tree is the id of the base's directory p ("" for the root) and its
// tree object's content, checked against the id (nil when the record has
// none); ok false when there is no such directory or its record is
// damaged.
func (t *baseTrees) tree(p string) (id string, content []byte, ok bool) {
	i := sort.Search(t.n, func(i int) bool {
		q, _, _, _ := t.record(i)
		return q >= p
	})
	if i == t.n {
		return "", nil, false
	}
	q, raw, content, ok := t.record(i)
	if !ok || q != p {
		return "", nil, false
	}
	id = hex.EncodeToString(raw)
	if content != nil && objectID(t.newHash, "tree", content) != id {
		return "", nil, false
	}
	return id, content, true
}
