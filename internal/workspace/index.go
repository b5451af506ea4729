package workspace

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

var errIndexFormat = errors.New("unsupported index format")

// parseIndex reads the entries (path, mode, object id) of a git index file
// of version 2 or 3, as written by read-tree in a fresh workspace, and the
// tree ids of its directories from the index's cache-tree extension
// (read-tree of one tree records every one of them; nil when the index
// has none, or one not valid throughout). Other versions return
// errIndexFormat; the caller then asks git. It reads only an index Create
// itself just wrote, before the agent has the directory.
func parseIndex(data []byte, hashLen int) ([]entry, map[string]string, error) {
	entries, off, err := parseIndexEntries(data, hashLen)
	if err != nil {
		return nil, nil, err
	}
	return entries, indexTrees(data, off, hashLen), nil
}

// parseIndexEntries reads the entries of an index, and where its
// extensions start.
func parseIndexEntries(data []byte, hashLen int) ([]entry, int, error) {
	if len(data) < 12 || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, 0, errIndexFormat
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version != 2 && version != 3 {
		return nil, 0, errIndexFormat
	}
	n := int(binary.BigEndian.Uint32(data[8:12]))
	if n > len(data)/40 {
		return nil, 0, errIndexFormat
	}
	entries := make([]entry, 0, n)
	off := 12
	fixed := 40 + hashLen + 2 // stat data, object id, flags
	for range n {
		if off+fixed > len(data) {
			return nil, 0, errIndexFormat
		}
		e := data[off:]
		mode := binary.BigEndian.Uint32(e[24:28])
		id := hex.EncodeToString(e[40 : 40+hashLen])
		flags := binary.BigEndian.Uint16(e[40+hashLen:])
		start := off + fixed
		if flags&0x4000 != 0 { // extended flags (version 3)
			if version < 3 {
				return nil, 0, errIndexFormat
			}
			start += 2
		}
		if flags&0x3000 != 0 { // a merge stage: not a fresh checkout
			return nil, 0, errIndexFormat
		}
		end := bytes.IndexByte(data[start:], 0)
		if end < 0 {
			return nil, 0, errIndexFormat
		}
		path := string(data[start : start+end])
		// Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
		size := start + end - off
		off += (size + 8) &^ 7
		entries = append(entries, entry{path: path, mode: mode, blob: id})
	}
	return entries, off, nil
}

// indexTrees reads the cache-tree extension ("TREE") of an index whose
// extensions start at off: the tree id of every directory, by path (the
// root's is ""). It is nil when the index has no such extension, or one
// that does not hold a valid id for every directory it names (a
// directory invalidated since the tree was read).
func indexTrees(data []byte, off, hashLen int) map[string]string {
	end := len(data) - hashLen // the index's own checksum
	for off+8 <= end {
		sig := string(data[off : off+4])
		size := int(binary.BigEndian.Uint32(data[off+4 : off+8]))
		off += 8
		if size < 0 || size > end-off {
			return nil
		}
		if sig == "TREE" {
			ids := map[string]string{}
			if rest, ok := cacheTree(data[off:off+size], nil, hashLen, ids); !ok || len(rest) != 0 {
				return nil
			}
			return ids
		}
		off += size
	}
	return nil
}

// cacheTree reads one node of the cache-tree into ids, with its
// subtrees: its name NUL (empty for the root alone), its entry and
// subtree counts, its id (when the count is not -1), then the subtrees.
// parent is the directory it is in (nil for the root).
func cacheTree(b []byte, parent *string, hashLen int, ids map[string]string) ([]byte, bool) {
	name, b, ok := bytes.Cut(b, []byte{0})
	if !ok || (parent == nil) != (len(name) == 0) {
		return nil, false
	}
	counts, b, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, false
	}
	ec, sc, ok := strings.Cut(string(counts), " ")
	entries, err1 := strconv.Atoi(ec)
	subtrees, err2 := strconv.Atoi(sc)
	if !ok || err1 != nil || err2 != nil || entries < 0 || subtrees < 0 || len(b) < hashLen {
		return nil, false // -1 entries: not valid, and so not a tree to trust
	}
	path := joinPath("", string(name))
	if parent != nil {
		path = joinPath(*parent, string(name))
	}
	ids[path] = hex.EncodeToString(b[:hashLen])
	b = b[hashLen:]
	for range subtrees {
		if b, ok = cacheTree(b, &path, hashLen, ids); !ok {
			return nil, false
		}
	}
	return b, true
}
