package worker

import (
	"context"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// journalAhead is the run store of one run's supervisor in the server's
// own worker. The journal's events of the run are not each a transaction
// of their own on the way to its agent's start ("sandbox started",
// "attempt started": a commit each, on PostgreSQL a round trip and a sync
// by the database): they ride on the next write of the record, in its
// transaction, or go on their own journalBatch after the first of them,
// as an agent host's do. The order stays: what was journaled goes before
// any write of the record that follows it, and a read of the journal
// sends what waits first. drain sends what is left.
type journalAhead struct {
	run.Store
	js run.JournaledStore
	id string

	// sendMu orders what is written: the events waiting, then a write.
	sendMu  sync.Mutex
	journal eventQueue
}

// newJournalAhead returns st for the supervisor of run id: st itself when
// it cannot journal events with a write.
func newJournalAhead(st run.Store, id string) run.Store {
	js, ok := st.(run.JournaledStore)
	if !ok {
		return st
	}
	return &journalAhead{Store: st, js: js, id: id}
}

// AppendEvent queues e (for run id; another run's goes at once). The
// event returned has no sequence number yet.
func (s *journalAhead) AppendEvent(ctx context.Context, id string, e run.Event) (run.Event, error) {
	if id != s.id || e.Type == "" {
		return s.Store.AppendEvent(ctx, id, e)
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	s.journal.add(e, s.drain)
	return e, nil
}

// drain journals the events waiting, each in a transaction of its own.
func (s *journalAhead) drain() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.send(s.journal.take())
}

// send journals events on their own (sendMu held); the journal is best
// effort, as the supervisor's own calls are.
func (s *journalAhead) send(events []run.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	for _, e := range events {
		_, _ = s.Store.AppendEvent(ctx, s.id, e)
	}
}

// write runs a write of the record with the events waiting; when it
// writes nothing (fn refused, the state moved on, an error), they are
// journaled on their own, before anything that follows.
func (s *journalAhead) write(id string, w func(events []run.Event) (*run.Run, error)) (*run.Run, error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	var events []run.Event
	if id == s.id {
		events = s.journal.take()
	}
	r, err := w(events)
	if err != nil {
		s.send(events)
	}
	return r, err
}

func (s *journalAhead) Update(ctx context.Context, id string, fn func(r *run.Run) error) (*run.Run, error) {
	return s.write(id, func(events []run.Event) (*run.Run, error) {
		return s.js.UpdateJournaled(ctx, id, events, fn)
	})
}

func (s *journalAhead) Transition(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string) (*run.Run, error) {
	return s.TransitionWith(ctx, id, from, to, reason, msg, nil)
}

func (s *journalAhead) TransitionWith(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string, fn func(r *run.Run) error) (*run.Run, error) {
	return s.write(id, func(events []run.Event) (*run.Run, error) {
		return s.js.TransitionJournaled(ctx, id, events, from, to, reason, msg, fn)
	})
}

// Events sends the events waiting first: the journal as the supervisor
// wrote it.
func (s *journalAhead) Events(ctx context.Context, id string, after int64) ([]run.Event, error) {
	if id == s.id {
		s.drain()
	}
	return s.Store.Events(ctx, id, after)
}
