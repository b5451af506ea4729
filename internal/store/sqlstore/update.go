package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Update reads the run, calls fn on a copy and stores the copy; see
// run.Store. ID, Seq and CreatedAt are kept from the stored record whatever
// fn does to them; Version and UpdatedAt are set by the store.
func (s *Store) Update(ctx context.Context, id string, fn func(r *run.Run) error) (*run.Run, error) {
	return s.UpdateJournaled(ctx, id, nil, fn)
}

// UpdateJournaled is Update that also appends events to the run's journal,
// in order, in the same transaction: they land with the record or not at
// all (not when fn refuses either). One transaction instead of one per
// event and one for the record: on PostgreSQL each is a commit (a WAL
// flush) and a few round trips.
func (s *Store) UpdateJournaled(ctx context.Context, id string, events []run.Event, fn func(r *run.Run) error) (*run.Run, error) {
	if err := checkEvents(id, events); err != nil {
		return nil, err
	}
	return s.modify(ctx, id, events, func(r *run.Run, _ time.Time) (*run.Event, error) { return nil, fn(r) })
}

// checkEvents refuses what AppendEvent refuses.
func checkEvents(id string, events []run.Event) error {
	for _, e := range events {
		if e.Type == "" {
			return fmt.Errorf("append event to run %s: event has no type", id)
		}
	}
	return nil
}

// Transition is the compare-and-set of a run's state; see run.Store and
// the files store, whose timestamps it keeps alike: StartedAt the first
// time the run leaves queued for an active state, FinishedAt on every
// terminal state, cleared when a run leaves one.
func (s *Store) Transition(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string) (*run.Run, error) {
	return s.TransitionWith(ctx, id, from, to, reason, msg, nil)
}

// TransitionWith is Transition that also applies fn (when not nil) in the
// same transaction; see run.Store. The state event and the record are
// written in one transaction, so they land together or not at all.
func (s *Store) TransitionWith(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string, fn func(r *run.Run) error) (*run.Run, error) {
	return s.TransitionJournaled(ctx, id, nil, from, to, reason, msg, fn)
}

// TransitionJournaled is TransitionWith that also appends events to the
// run's journal, in order and before the state event, in the same
// transaction (see UpdateJournaled).
func (s *Store) TransitionJournaled(ctx context.Context, id string, events []run.Event, from []run.State, to run.State, reason run.Reason, msg string, fn func(r *run.Run) error) (*run.Run, error) {
	if !to.Valid() {
		return nil, fmt.Errorf("transition run %s: unknown state %q", id, to)
	}
	if err := checkEvents(id, events); err != nil {
		return nil, err
	}
	return s.modify(ctx, id, events, func(r *run.Run, now time.Time) (*run.Event, error) {
		if !slices.Contains(from, r.State) {
			return nil, fmt.Errorf("run %s is %s, not %v: %w", id, r.State, from, run.ErrConflict)
		}
		prev, started := r.State, r.StartedAt
		if fn != nil {
			if err := fn(r); err != nil {
				return nil, err
			}
			r.StartedAt = started
		}
		r.Move(prev, to, reason, msg, now)
		return &run.Event{Time: now, Type: run.EventState, State: to, Reason: reason, Message: msg}, nil
	})
}

// modify is the read-modify-write behind Update and Transition, in one
// write transaction that locks the run's row: fn gets a freshly decoded
// copy, and events, then the event fn returns (if any), are appended in
// the same transaction. fn's error is returned unchanged and nothing is
// written.
func (s *Store) modify(ctx context.Context, id string, events []run.Event, fn func(r *run.Run, now time.Time) (*run.Event, error)) (*run.Run, error) {
	if err := run.ValidateID(id); err != nil {
		return nil, err
	}
	var out *run.Run
	var fnErr error
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		fnErr = nil
		var seq, version, last int64
		var doc string
		err := tx.QueryRowContext(ctx, `SELECT seq, version, last_event, doc FROM runs WHERE id = $1`+s.db.ForUpdate(), id).
			Scan(&seq, &version, &last, &doc)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("update run %s: %w", id, err)
		}
		next, err := decodeRun(id, seq, version, doc)
		if err != nil {
			return err
		}
		created := next.CreatedAt
		now := time.Now().UTC()
		e, err := fn(next, now)
		if err != nil {
			fnErr = err
			return err
		}
		next.ID, next.Seq, next.CreatedAt = id, seq, created
		next.Version = version + 1
		next.UpdatedAt = now
		b, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("update run %s: encode: %w", id, err)
		}
		for _, ev := range events {
			last++
			if err := s.insertEvent(ctx, tx, id, last, &ev); err != nil {
				return err
			}
		}
		if e != nil {
			last++
			if err := s.insertEvent(ctx, tx, id, last, e); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = $2, repo = $3, version = $4, last_event = $5, supervised = $6, doc = $7 WHERE id = $1`,
			id, string(next.State), repoKey(next.Repo), next.Version, last, next.Supervisor != nil, string(b)); err != nil {
			return fmt.Errorf("update run %s: %w", id, err)
		}
		out = next
		return nil
	})
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertEvent writes e as event seq of run id, setting e.Seq (and e.Time
// when zero), and tells the event hook.
func (s *Store) insertEvent(ctx context.Context, tx *sql.Tx, id string, seq int64, e *run.Event) error {
	e.Seq = seq
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("append event to run %s: encode: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_events (run_id, seq, type, doc) VALUES ($1, $2, $3, $4)`,
		id, seq, e.Type, string(b)); err != nil {
		return fmt.Errorf("append event to run %s: %w", id, err)
	}
	if s.onEvent != nil {
		return s.onEvent(ctx, tx, id, *e)
	}
	return nil
}

// AppendEvent appends e to the run's journal; see run.Store. The run's
// event counter is counted up first, which locks its row until the
// commit, so appends to one run are numbered in the order they commit.
func (s *Store) AppendEvent(ctx context.Context, id string, e run.Event) (run.Event, error) {
	if err := run.ValidateID(id); err != nil {
		return e, err
	}
	if e.Type == "" {
		return e, fmt.Errorf("append event to run %s: event has no type", id)
	}
	in := e
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		e = in
		var seq int64
		err := tx.QueryRowContext(ctx, `UPDATE runs SET last_event = last_event + 1 WHERE id = $1 RETURNING last_event`, id).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("append event to run %s: %w", id, err)
		}
		return s.insertEvent(ctx, tx, id, seq, &e)
	})
	if err != nil {
		return in, err
	}
	return e, nil
}

// Events returns the journal entries with Seq > after; see run.Store. One
// statement reads the run's row and its events, so a missing run
// (ErrNotFound) and a run without events are told apart on one snapshot.
func (s *Store) Events(ctx context.Context, id string, after int64) ([]run.Event, error) {
	if err := run.ValidateID(id); err != nil {
		return nil, err
	}
	rows, err := s.db.Read().QueryContext(ctx, `SELECT e.seq, e.doc FROM runs r
		LEFT JOIN run_events e ON e.run_id = r.id AND e.seq > $2
		WHERE r.id = $1 ORDER BY e.seq`, id, after)
	if err != nil {
		return nil, fmt.Errorf("read events of run %s: %w", id, err)
	}
	defer rows.Close()
	found := false
	var out []run.Event
	for rows.Next() {
		found = true
		var seq sql.NullInt64
		var doc sql.NullString
		if err := rows.Scan(&seq, &doc); err != nil {
			return nil, fmt.Errorf("read events of run %s: %w", id, err)
		}
		if !seq.Valid {
			continue // the run, without events after after
		}
		var e run.Event
		if err := json.Unmarshal([]byte(doc.String), &e); err != nil {
			return nil, fmt.Errorf("run %s: event %d: %v: %w", id, seq.Int64, err, run.ErrCorrupt)
		}
		e.Seq = seq.Int64
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events of run %s: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("run %s: %w", id, run.ErrNotFound)
	}
	return out, nil
}
