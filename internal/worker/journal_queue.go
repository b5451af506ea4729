package worker

import (
	"cmp"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// eventQueue holds the journal events of a run that wait to be written,
// in order (an agent host's, journalAhead's): the first to wait schedules
// their sending journalBatch on, unless a write of the record takes them
// first.
type eventQueue struct {
	batch time.Duration // 0: journalBatch

	mu      sync.Mutex
	events  []run.Event
	pending bool // a sending is scheduled or on its way
}

// add queues e; the first event to wait schedules send.
func (q *eventQueue) add(e run.Event, send func()) {
	q.mu.Lock()
	q.events = append(q.events, e)
	start := !q.pending
	q.pending = true
	q.mu.Unlock()
	if start {
		time.AfterFunc(cmp.Or(q.batch, journalBatch), send)
	}
}

// take takes every event waiting (a write of the record carries them).
func (q *eventQueue) take() []run.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events, q.pending = nil, false
	return evs
}

// next takes the first event waiting; ok is false when none is left, and
// the sending is over.
func (q *eventQueue) next() (e run.Event, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.events) == 0 {
		q.pending = false
		return run.Event{}, false
	}
	e = q.events[0]
	q.events = q.events[1:]
	return e, true
}

// putBack puts events taken before those waiting.
func (q *eventQueue) putBack(events []run.Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(events, q.events...)
}
