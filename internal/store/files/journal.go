package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// The journal: one JSON object per line, each ending in '\n'. A line
// without its '\n' at the end of the file is torn (a crash mid-append or an
// append in progress) and is not an event; the next append first ends it
// with '\n' so it stays a single unreadable line that readers skip.

// AppendEvent appends e to the run's journal; see run.Store.
func (s *Store) AppendEvent(ctx context.Context, id string, e run.Event) (run.Event, error) {
	return s.appendEvent(ctx, id, e, syncNow)
}

// appendEvent appends to the journal under the journal's flock: find the
// last Seq, write one line with O_APPEND, fsync as mode says.
func (s *Store) appendEvent(ctx context.Context, id string, e run.Event, mode syncMode) (run.Event, error) {
	if err := ctx.Err(); err != nil {
		return e, err
	}
	if err := run.ValidateID(id); err != nil {
		return e, err
	}
	tx, e, err := s.beginAppend(ctx, id, e, mode)
	if err != nil {
		return e, err
	}
	tx.end(true)
	return e, nil
}

// AppendEventLazy appends e as AppendEvent does, except that it does not
// wait for the line to be durable; see run.LazyJournal. Readers see it at
// once, and a process that dies after the call loses nothing: the line is
// in the kernel's hands. It is made durable by the fsync of the run's next
// state event (which covers every line before it) or, where none comes,
// within lazySync: only a crash of the machine in that window can lose it.
func (s *Store) AppendEventLazy(ctx context.Context, id string, e run.Event) (run.Event, error) {
	e, err := s.appendEvent(ctx, id, e, syncLater)
	if err == nil {
		s.lazy.schedule(s.L.Events(id))
	}
	return e, err
}

// lazySync bounds how long a lazily appended line waits for its fsync (a
// variable for tests).
var lazySync = time.Second

// lazySyncs are the journals with a lazy line waiting for its fsync: one
// timer per journal at a time.
type lazySyncs struct {
	mu      sync.Mutex
	pending map[string]bool
}

// schedule fsyncs the journal at path lazySync from now, unless that is
// scheduled already.
func (l *lazySyncs) schedule(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[path] {
		return
	}
	if l.pending == nil {
		l.pending = make(map[string]bool)
	}
	l.pending[path] = true
	time.AfterFunc(lazySync, func() {
		l.mu.Lock()
		delete(l.pending, path)
		l.mu.Unlock()
		if f, err := os.Open(path); err == nil {
			_ = syncFile(f)
			f.Close()
		}
	})
}

// syncFile is (*os.File).Sync; tests count and fail the store's fsyncs
// through it.
var syncFile = (*os.File).Sync

// syncMode is when beginAppend's line is fsynced.
type syncMode int

const (
	syncNow   syncMode = iota // before beginAppend returns
	syncAsync                 // from a goroutine started at once: journalAppend.wait
	syncLater                 // by a later fsync of the journal (AppendEventLazy)
)

// journalAppend is an appended event whose journal flock is still held:
// end(true) keeps it, end(false) cuts the journal back to where it was (a
// transition whose record could not be written), then unlocks. Its line
// is fsynced unless it was appended with syncLater; with syncAsync, wait
// says when and how the fsync ended.
type journalAppend struct {
	s      *Store
	id     string
	f      *os.File
	prev   int64 // journal size before the line
	key    journalKey
	seq    int64
	synced chan error // syncAsync: the fsync's result, once
	sync   error      // what synced said (once waited is set)
	waited bool
}

// wait waits for the fsync of a syncAsync line and returns its error; nil
// at once for the other modes.
func (tx *journalAppend) wait() error {
	if tx.synced != nil && !tx.waited {
		tx.sync, tx.waited = <-tx.synced, true
	}
	return tx.sync
}

func (tx *journalAppend) end(keep bool) {
	tx.wait() // the fsync is done with f before it is cut or closed
	defer tx.f.Close()
	if keep {
		tx.s.journal.put(tx.id, tx.key, tx.seq)
		return
	}
	tx.s.journal.forget(tx.id)
	if err := tx.f.Truncate(tx.prev); err == nil {
		_ = syncFile(tx.f)
	}
}

// beginAppend writes e as the journal's next line, fsyncs it as mode says
// and returns with the journal still locked; see journalAppend.
func (s *Store) beginAppend(ctx context.Context, id string, e run.Event, mode syncMode) (*journalAppend, run.Event, error) {
	if e.Type == "" {
		return nil, e, fmt.Errorf("append event to run %s: event has no type", id)
	}
	// O_CREATE inside lockFile fails with ENOENT when the run directory is
	// missing (never made, or renamed away by Delete).
	f, err := lockFile(ctx, s.L.Events(id), os.O_RDWR|os.O_APPEND)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, e, fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		return nil, e, fmt.Errorf("append event to run %s: %w", id, err)
	}
	fail := func(err error) (*journalAppend, run.Event, error) {
		f.Close()
		return nil, e, fmt.Errorf("append event to run %s: %w", id, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("events.jsonl is %s: %w", fileKind(fi.Mode()), errNotRegular))
	}
	key := fileKey(fi)
	last, ok := s.journal.get(id, key)
	var line []byte
	if !ok {
		var torn bool
		last, torn, err = lastSeq(f, fi.Size())
		if err != nil {
			return fail(err)
		}
		if torn {
			line = append(line, '\n')
		}
	}
	e.Seq = last + 1
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fail(fmt.Errorf("encode: %w", err))
	}
	line = append(append(line, b...), '\n')
	tx := &journalAppend{s: s, id: id, f: f, prev: fi.Size(), seq: e.Seq}
	if _, err := f.Write(line); err != nil {
		tx.end(false) // a short write leaves no fragment behind
		return nil, e, fmt.Errorf("append event to run %s: %w", id, err)
	}
	key.size = fi.Size() + int64(len(line))
	tx.key = key
	switch mode {
	case syncNow:
		if err := syncFile(f); err != nil {
			tx.end(false)
			return nil, e, fmt.Errorf("append event to run %s: fsync: %w", id, err)
		}
	case syncAsync:
		tx.synced = make(chan error, 1)
		go func() { tx.synced <- syncFile(f) }()
	}
	return tx, e, nil
}

// lastSeq finds the Seq of the last complete, readable line of a journal of
// the given size, reading backwards from its end in chunks. torn reports a
// last line without its '\n'.
func lastSeq(f *os.File, size int64) (seq int64, torn bool, err error) {
	const chunk = 32 << 10
	var buf []byte // the file's bytes [pos, size)
	pos := size
	tried := size // lines starting at or after this offset failed to parse
	for pos > 0 {
		n := min(int64(chunk), pos)
		pos -= n
		b := make([]byte, n, n+int64(len(buf)))
		if _, err := f.ReadAt(b, pos); err != nil && err != io.EOF {
			return 0, false, err
		}
		buf = append(b, buf...)
		if pos+n == size {
			torn = buf[len(buf)-1] != '\n'
		}
		end := bytes.LastIndexByte(buf, '\n') + 1 // buf[:end] holds whole lines
		for end > 0 {
			start := bytes.LastIndexByte(buf[:end-1], '\n') + 1
			if start == 0 && pos > 0 {
				break // the line may begin before buf: read more
			}
			if pos+int64(start) < tried {
				if s, ok := lineSeq(buf[start : end-1]); ok {
					return s, torn, nil
				}
			}
			end = start
		}
		tried = pos + int64(end)
	}
	return 0, torn, nil
}

func lineSeq(line []byte) (int64, bool) {
	var v struct {
		Seq int64 `json:"seq"`
	}
	if err := json.Unmarshal(line, &v); err != nil || v.Seq <= 0 {
		return 0, false
	}
	return v.Seq, true
}

// Events returns the journal entries with Seq > after; see run.Store.
// Lines that cannot be read (a torn append) are skipped.
func (s *Store) Events(ctx context.Context, id string, after int64) ([]run.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := run.ValidateID(id); err != nil {
		return nil, err
	}
	data, err := readRegular(s.L.Events(id), 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, derr := os.Lstat(s.L.RunDir(id)); derr == nil {
				return nil, nil // a run without a journal yet
			}
			return nil, fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		return nil, fmt.Errorf("read events of run %s: %w", id, err)
	}
	var out []run.Event
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn last line
		}
		line := data[:i]
		data = data[i+1:]
		if n, ok := leadingSeq(line); ok && n <= after {
			continue // skip without decoding: a follower polling a long journal
		}
		var e run.Event
		if err := json.Unmarshal(line, &e); err != nil || e.Seq <= after {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// leadingSeq reads the Seq of a line as this store writes it
// ({"seq":N,...}) without decoding the rest; ok is false for anything else.
func leadingSeq(line []byte) (n int64, ok bool) {
	const prefix = `{"seq":`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return 0, false
	}
	digits := 0
	for _, c := range line[len(prefix):] {
		if c < '0' || c > '9' || digits == 18 {
			break
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	if digits == 0 || len(line) <= len(prefix)+digits || line[len(prefix)+digits] != ',' {
		return 0, false
	}
	return n, true
}

// journalCache remembers, per run, the journal file (device, inode, size)
// this process last appended to and the Seq it wrote, so an append does not
// re-read the journal when nobody else wrote in between. Any change to the
// file (another process appended, the run was recreated) misses the cache.
type journalCache struct {
	mu sync.Mutex
	m  map[string]journalPos
}

type journalKey struct {
	dev, ino uint64
	size     int64
}

type journalPos struct {
	key journalKey
	seq int64
}

func fileKey(fi fs.FileInfo) journalKey {
	k := journalKey{size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return k
}

func (c *journalCache) get(id string, k journalKey) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[id]
	if !ok || p.key != k || k.ino == 0 {
		return 0, false
	}
	return p.seq, true
}

func (c *journalCache) put(id string, k journalKey, seq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]journalPos)
	}
	c.m[id] = journalPos{key: k, seq: seq}
}

func (c *journalCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
