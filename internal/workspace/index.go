package workspace

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
)

var errIndexFormat = errors.New("unsupported index format")

// parseIndex reads the entries (path, mode, object id) of a git index file
// of version 2 or 3, as written by read-tree in a fresh workspace. Other
// versions return errIndexFormat; the caller then asks git. It reads only
// an index Create itself just wrote, before the agent has the directory.
func parseIndex(data []byte, hashLen int) ([]entry, error) {
	if len(data) < 12 || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, errIndexFormat
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version != 2 && version != 3 {
		return nil, errIndexFormat
	}
	n := int(binary.BigEndian.Uint32(data[8:12]))
	if n > len(data)/40 {
		return nil, errIndexFormat
	}
	entries := make([]entry, 0, n)
	off := 12
	fixed := 40 + hashLen + 2 // stat data, object id, flags
	for range n {
		if off+fixed > len(data) {
			return nil, errIndexFormat
		}
		e := data[off:]
		mode := binary.BigEndian.Uint32(e[24:28])
		id := hex.EncodeToString(e[40 : 40+hashLen])
		flags := binary.BigEndian.Uint16(e[40+hashLen:])
		start := off + fixed
		if flags&0x4000 != 0 { // extended flags (version 3)
			if version < 3 {
				return nil, errIndexFormat
			}
			start += 2
		}
		if flags&0x3000 != 0 { // a merge stage: not a fresh checkout
			return nil, errIndexFormat
		}
		end := bytes.IndexByte(data[start:], 0)
		if end < 0 {
			return nil, errIndexFormat
		}
		path := string(data[start : start+end])
		// Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
		size := start + end - off
		off += (size + 8) &^ 7
		entries = append(entries, entry{path: path, mode: mode, blob: id})
	}
	return entries, nil
}
