package workspace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// manifestName is the manifest's file name in the state directory.
const manifestName = "workspace-manifest"

const manifestMagic = "agentrun-workspace-manifest 1"

// Git modes.
const (
	modeFile    uint32 = 0o100644
	modeExec    uint32 = 0o100755
	modeSymlink uint32 = 0o120000
	modeGitlink uint32 = 0o160000
)

// stamp is a file time with nanoseconds.
type stamp struct{ sec, nsec int64 }

func (s stamp) before(o stamp) bool {
	return s.sec < o.sec || (s.sec == o.sec && s.nsec < o.nsec)
}

// entry is one checked-out path as Create left it.
type entry struct {
	path  string
	mode  uint32 // git mode
	size  int64
	mtime stamp
	ctime stamp
	ino   uint64
	blob  string // object id of the blob (or the gitlink's commit)
}

// manifest is what Create recorded.
type manifest struct {
	format  string // sha1 | sha256
	commit  string
	written stamp // a file time taken after every entry was stat'ed
	entries []entry
	// trees are the tree ids of the base's directories, from the index's
	// cache-tree (nil when it had none): written beside the manifest, for
	// the export (trees.go).
	trees []treeRec

	once sync.Once // makes idx
	idx  *manifestIndex
}

// racy reports an entry whose ctime is not before the manifest stamp: a
// change in the same clock tick could leave its stat data as it was, so
// Scan reads it.
func (m *manifest) racy(e *entry) bool { return !e.ctime.before(m.written) }

// sortEntries sorts entries by path (git's index order already is).
func sortEntries(entries []entry) {
	if !slices.IsSortedFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) }) {
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	}
}

// writeManifest writes m to stateDir atomically, and its trees before it.
// It takes the stamp from the temp file's own ctime, which the file system
// set after every entry was stat'ed (entries must be stat'ed before the
// call).
func writeManifest(stateDir string, m *manifest) error {
	if len(m.trees) > 0 {
		if err := writeTrees(stateDir, m.format, m.commit, m.trees); err != nil {
			return err
		}
	}
	f, err := os.CreateTemp(stateDir, manifestName+".tmp*")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	m.written = stamp{int64(st.Ctim.Sec), int64(st.Ctim.Nsec)}
	w := bufio.NewWriterSize(f, 256<<10)
	fmt.Fprintf(w, "%s %s %s %d %d\n", manifestMagic, m.format, m.commit, m.written.sec, m.written.nsec)
	var buf []byte
	for i := range m.entries {
		e := &m.entries[i]
		buf = buf[:0]
		buf = strconv.AppendUint(buf, uint64(e.mode), 8)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.size, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.mtime.sec, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.mtime.nsec, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.ctime.sec, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.ctime.nsec, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendUint(buf, e.ino, 10)
		buf = append(buf, ' ')
		buf = append(buf, e.blob...)
		buf = append(buf, ' ')
		buf = append(buf, e.path...)
		buf = append(buf, 0)
		_, _ = w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(stateDir, manifestName)); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	ok = true
	return nil
}

// readManifest reads the manifest from stateDir.
func readManifest(stateDir string) (*manifest, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, manifestName))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read manifest in %s: %w", stateDir, ErrNoManifest)
		}
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return parseManifest(data)
}

func parseManifest(data []byte) (*manifest, error) {
	bad := func(what string) error { return fmt.Errorf("read manifest: damaged %s", what) }
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(head, []byte(manifestMagic+" ")) {
		return nil, bad("header")
	}
	hf := strings.Fields(string(head[len(manifestMagic)+1:]))
	if len(hf) != 4 {
		return nil, bad("header")
	}
	m := &manifest{format: hf[0], commit: hf[1]}
	var err1, err2 error
	m.written.sec, err1 = strconv.ParseInt(hf[2], 10, 64)
	m.written.nsec, err2 = strconv.ParseInt(hf[3], 10, 64)
	if err1 != nil || err2 != nil || !isObjectID(m.commit) {
		return nil, bad("header")
	}
	m.entries = make([]entry, 0, bytes.Count(body, []byte{0}))
	for len(body) > 0 {
		rec, rest, ok := bytes.Cut(body, []byte{0})
		if !ok {
			return nil, bad("record")
		}
		body = rest
		e, err := parseRecord(rec)
		if err != nil {
			return nil, err
		}
		m.entries = append(m.entries, e)
	}
	return m, nil
}
