package workspace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// mappedManifest is a layer's manifest read in place: the file is mapped
// into memory, not parsed, and an entry is decoded only when a scan looks
// it up, by a binary search over the records (sorted by path, as
// writeManifest writes a layer's). So a scan of an overlay's upper layer
// touches a few pages of the manifest per change, whatever the size of
// the repository, where parsing it and indexing every path cost as much
// as the repository is big.
//
// An entry's id is the offset of its record. A record found damaged
// marks the manifest damaged (the scan then fails) instead of failing
// the lookup.
//
// The file is the layer's, which nothing changes once it is published
// (a layer is removed whole, by a rename and unlinks, which leave the
// mapping readable).
type mappedManifest struct {
	format, commit string
	data           []byte // the records, after the header line
	bad            atomic.Bool
}

// mapManifest maps the manifest in dir. The mapping is released when the
// manifest is no longer reachable.
func mapManifest(dir string) (*mappedManifest, error) {
	path := filepath.Join(dir, manifestName)
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("read manifest in %s: %w", dir, ErrNoManifest)
		}
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	if fi.Size() == 0 || int64(int(fi.Size())) != fi.Size() {
		return nil, fmt.Errorf("read manifest: damaged header")
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	m, err := newMappedManifest(data)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, err
	}
	runtime.AddCleanup(m, func(b []byte) { _ = unix.Munmap(b) }, data)
	return m, nil
}

// newMappedManifest reads the header of the manifest data.
func newMappedManifest(data []byte) (*mappedManifest, error) {
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(head, []byte(manifestMagic+" ")) {
		return nil, fmt.Errorf("read manifest: damaged header")
	}
	hf := strings.Fields(string(head[len(manifestMagic)+1:]))
	if len(hf) != 4 || !isObjectID(hf[1]) {
		return nil, fmt.Errorf("read manifest: damaged header")
	}
	return &mappedManifest{format: hf[0], commit: hf[1], data: body}, nil
}

// damaged reports a record found damaged by a lookup.
func (m *mappedManifest) damaged() bool { return m.bad.Load() }

// path is the path of the record at off, and where the next one starts.
func (m *mappedManifest) path(off int) (p []byte, next int) {
	end := bytes.IndexByte(m.data[off:], 0)
	if end < 0 {
		m.bad.Store(true)
		return nil, len(m.data)
	}
	rec := m.data[off : off+end]
	// The path is the last field, after eight (it may hold spaces).
	for range 8 {
		i := bytes.IndexByte(rec, ' ')
		if i < 0 {
			m.bad.Store(true)
			return nil, off + end + 1
		}
		rec = rec[i+1:]
	}
	return rec, off + end + 1
}

// lowerBound is the offset of the first record whose path is not before
// key (len(data) when there is none).
func (m *mappedManifest) lowerBound(key string) int {
	lo, hi := 0, len(m.data) // records starting before lo are before key; from hi on, not
	for lo < hi {
		mid := lo + (hi-lo)/2
		r := mid
		if r > lo && m.data[r-1] != 0 { // the start of the next record
			if i := bytes.IndexByte(m.data[r:hi], 0); i >= 0 {
				r += i + 1
			} else {
				r = hi
			}
		}
		if r >= hi { // no record starts in [mid, hi): look at lo's
			r = lo
		}
		p, next := m.path(r)
		if string(p) < key {
			lo = next
		} else {
			hi = r
		}
	}
	return lo
}

func (m *mappedManifest) find(p string) (int, bool) {
	off := m.lowerBound(p)
	if off >= len(m.data) {
		return 0, false
	}
	q, _ := m.path(off)
	return off, string(q) == p
}

func (m *mappedManifest) at(off int) *entry {
	end := bytes.IndexByte(m.data[off:], 0)
	if end < 0 {
		m.bad.Store(true)
		return &entry{}
	}
	e, err := parseRecord(m.data[off : off+end])
	if err != nil {
		m.bad.Store(true)
	}
	return &e
}

func (m *mappedManifest) trackedDir(p string) bool {
	dir := p + "/"
	off := m.lowerBound(dir)
	if off >= len(m.data) {
		return false
	}
	q, _ := m.path(off)
	return bytes.HasPrefix(q, []byte(dir))
}

func (m *mappedManifest) below(dir string, fn func(int) error) error {
	prefix := []byte(dir + "/")
	for off := m.lowerBound(dir + "/"); off < len(m.data); {
		q, next := m.path(off)
		if !bytes.HasPrefix(q, prefix) {
			return nil
		}
		if err := fn(off); err != nil {
			return err
		}
		off = next
	}
	return nil
}

// parseRecord decodes one manifest record (without its NUL).
func parseRecord(rec []byte) (entry, error) {
	bad := fmt.Errorf("read manifest: damaged record")
	var e entry
	f := strings.SplitN(string(rec), " ", 9)
	if len(f) != 9 {
		return e, bad
	}
	mode, err := strconv.ParseUint(f[0], 8, 32)
	if err != nil {
		return e, fmt.Errorf("read manifest: damaged record mode")
	}
	e.mode = uint32(mode)
	nums := [5]*int64{&e.size, &e.mtime.sec, &e.mtime.nsec, &e.ctime.sec, &e.ctime.nsec}
	for i, p := range nums {
		if *p, err = strconv.ParseInt(f[1+i], 10, 64); err != nil {
			return e, bad
		}
	}
	if e.ino, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return e, bad
	}
	e.blob, e.path = f[7], f[8]
	return e, nil
}
