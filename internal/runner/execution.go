package runner

import (
	"container/list"
	"sync"
)

// execution is one request id: its captured output (for streaming and for
// resuming a cut stream from an offset) and, once done, its final response.
type execution struct {
	id string
	op string

	mu        sync.Mutex
	cond      *sync.Cond
	out       [2][]byte // captured stdout, stderr (up to the output cap)
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

// capture appends p to stream i, keeping at most limit bytes in total. It
// reports whether anything was dropped.
func (e *execution) capture(i int, p []byte, limit int64) (dropped bool) {
	e.mu.Lock()
	room := limit - int64(len(e.out[i]))
	if room < int64(len(p)) {
		dropped = true
		p = p[:max(room, 0)]
	}
	if len(p) > 0 {
		e.out[i] = append(e.out[i], p...)
		e.cond.Broadcast()
	}
	e.mu.Unlock()
	return dropped
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

func (e *execution) wasCancelled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cancelled
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
