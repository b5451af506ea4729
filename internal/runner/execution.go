package runner

import (
	"bufio"
	"bytes"
	"container/list"
	"io"
	"strconv"
	"strings"
	"sync"
)

// execution is one request id: its captured output (for streaming and for
// resuming a cut stream from an offset) and, once done, its final response.
type execution struct {
	id string
	op string

	mu        sync.Mutex
	cond      *sync.Cond
	out       [2][]byte // captured stdout, stderr (head, then at the end a cut note and the tail)
	tails     [2]*ring  // the tail of a stream longer than half the cap, until endCapture
	done      bool
	final     *response
	cancelled bool
	cancelFn  func()
}

func newExecution(id, op string) *execution {
	e := &execution{id: id, op: op}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// doneExecution is a finished execution answering err.
func doneExecution(id string, err *OpError) *execution {
	e := newExecution(id, "")
	e.done = true
	e.final = &response{ID: id, Done: true, Error: err}
	return e
}

// capture appends p to stream i under the output cap limit: the first
// half of limit is kept (and streamed) as it comes, the last half is kept
// in a ring until endCapture, so that the end of a long output (where a
// failing check says why) is never lost. It reports whether anything has
// been cut so far.
func (e *execution) capture(i int, p []byte, limit int64) (cut bool) {
	head := limit - limit/2
	e.mu.Lock()
	defer e.mu.Unlock()
	if room := head - int64(len(e.out[i])); room > 0 && e.tails[i] == nil {
		n := min(room, int64(len(p)))
		e.out[i] = append(e.out[i], p[:n]...)
		e.cond.Broadcast()
		p = p[n:]
	}
	if len(p) > 0 {
		if e.tails[i] == nil {
			e.tails[i] = &ring{max: int(limit / 2)}
		}
		e.tails[i].write(p)
	}
	return e.tails[i] != nil && e.tails[i].dropped > 0
}

// endCapture appends what the ring of stream i kept: after a cut note if
// bytes were cut in between. It reports whether bytes were cut.
func (e *execution) endCapture(i int) (cut bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.tails[i]
	if t == nil {
		return false
	}
	e.tails[i] = nil
	if t.dropped > 0 {
		e.out[i] = append(e.out[i], CutNote(t.dropped)...)
	}
	e.out[i] = append(e.out[i], t.bytes()...)
	e.cond.Broadcast()
	return t.dropped > 0
}

// CutNote is what an exec's stream holds where n bytes of the middle of
// a long output were cut (the stream keeps the first and the last half of
// the output cap).
func CutNote(n int64) string {
	return "\n... " + strconv.FormatInt(n, 10) + " bytes cut ...\n"
}

// maxCutNote bounds len(CutNote(n)): the client lets that much past the
// output cap through.
const maxCutNote = 64

// CutBytes reports the bytes cut by every cut note in b.
func CutBytes(b []byte) int64 {
	n, _ := CopyNotingCuts(io.Discard, bytes.NewReader(b))
	return n
}

// CopyNotingCuts copies r to w and reports the bytes cut by the cut notes
// it saw (each a line of its own after a newline, as CutNote writes it).
func CopyNotingCuts(w io.Writer, r io.Reader) (cut int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	lineStart := false // a note follows a newline
	for {
		chunk, rerr := br.ReadSlice('\n')
		if lineStart && len(chunk) < maxCutNote {
			if s, ok := strings.CutPrefix(string(chunk), "... "); ok {
				if s, ok := strings.CutSuffix(s, " bytes cut ...\n"); ok {
					if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
						cut += v
					}
				}
			}
		}
		if len(chunk) > 0 {
			if _, err := w.Write(chunk); err != nil {
				return cut, err
			}
			lineStart = chunk[len(chunk)-1] == '\n'
		}
		switch {
		case rerr == nil || rerr == bufio.ErrBufferFull:
		case rerr == io.EOF:
			return cut, nil
		default:
			return cut, rerr
		}
	}
}

// ring keeps the last max bytes written and counts the ones it dropped.
type ring struct {
	max     int
	buf     []byte
	start   int // index of the oldest byte once full
	dropped int64
}

func (r *ring) write(p []byte) {
	if r.max <= 0 {
		r.dropped += int64(len(p))
		return
	}
	if len(p) >= r.max {
		r.dropped += int64(len(r.buf) + len(p) - r.max)
		r.buf = append(r.buf[:0], p[len(p)-r.max:]...)
		r.start = 0
		return
	}
	if room := r.max - len(r.buf); room > 0 {
		n := min(room, len(p))
		r.buf = append(r.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 { // full: overwrite the oldest
		n := copy(r.buf[r.start:], p)
		r.dropped += int64(n)
		p = p[n:]
		r.start = (r.start + n) % r.max
	}
}

func (r *ring) bytes() []byte {
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

func (e *execution) cancel() {
	e.mu.Lock()
	e.cancelled = true
	fn := e.cancelFn
	e.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (e *execution) finish(r *response) {
	e.mu.Lock()
	e.done = true
	e.final = r
	e.cond.Broadcast()
	e.mu.Unlock()
}

// size is what a finished execution holds in memory.
func (e *execution) size() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := int64(len(e.out[0]) + len(e.out[1]) + 256)
	if e.final != nil {
		n += int64(len(e.final.Result))
	}
	return n
}

// stream sends the output from off onwards, then the final response, on w.
// It returns when everything is sent or the connection fails.
func (e *execution) stream(w *connWriter, off [2]int64) {
	names := [2]string{streamStdout, streamStderr}
	for {
		e.mu.Lock()
		for !e.done && int64(len(e.out[0])) <= off[0] && int64(len(e.out[1])) <= off[1] {
			e.cond.Wait()
		}
		var pend [2][]byte
		for i := range pend {
			if int64(len(e.out[i])) > off[i] {
				pend[i] = e.out[i][off[i]:]
			}
		}
		done, final := e.done, e.final
		e.mu.Unlock()
		for i, p := range pend {
			for len(p) > 0 {
				n := min(len(p), chunkSize)
				if err := w.send(&response{ID: e.id, Stream: names[i], Off: off[i], Data: p[:n]}); err != nil {
					return
				}
				off[i] += int64(n)
				p = p[n:]
			}
		}
		if done {
			w.send(final)
			return
		}
	}
}

const (
	defaultCacheEntries = 4096
	defaultCacheBytes   = 64 << 20
	forgottenIDs        = 1 << 16
)

// resultCache is the bounded LRU of finished executions. The ids of
// evicted mutating requests are remembered (bounded) so that a late resend
// is refused instead of run again.
type resultCache struct {
	maxEntries int
	maxBytes   int64
	bytes      int64
	ll         *list.List // front: most recent
	byID       map[string]*list.Element
	gone       map[string]bool
	goneOrder  []string
}

type cacheEntry struct {
	e    *execution
	size int64
}

func newResultCache(entries int, bytes int64) *resultCache {
	return &resultCache{maxEntries: entries, maxBytes: bytes, ll: list.New(), byID: map[string]*list.Element{}, gone: map[string]bool{}}
}

func (c *resultCache) get(id string) *execution {
	el := c.byID[id]
	if el == nil {
		return nil
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry).e
}

func (c *resultCache) forgotten(id string) bool { return c.gone[id] }

func (c *resultCache) put(e *execution) {
	ce := &cacheEntry{e: e, size: e.size()}
	c.byID[e.id] = c.ll.PushFront(ce)
	c.bytes += ce.size
	for c.ll.Len() > 1 && (c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes) {
		el := c.ll.Back()
		old := el.Value.(*cacheEntry)
		c.ll.Remove(el)
		delete(c.byID, old.e.id)
		c.bytes -= old.size
		if mutating(old.e.op) {
			c.remember(old.e.id)
		}
	}
}

func (c *resultCache) remember(id string) {
	if len(c.goneOrder) >= forgottenIDs {
		delete(c.gone, c.goneOrder[0])
		c.goneOrder = c.goneOrder[1:]
	}
	c.gone[id] = true
	c.goneOrder = append(c.goneOrder, id)
}
