package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Update reads the run, calls fn on a copy and stores the copy; see
// run.Store. ID, Seq and CreatedAt are kept from the stored record whatever
// fn does to them; Version and UpdatedAt are set by the store.
func (s *Store) Update(ctx context.Context, id string, fn func(r *run.Run) error) (*run.Run, error) {
	return s.modify(ctx, id, true, func(r *run.Run, _ time.Time) (*journalAppend, error) { return nil, fn(r) })
}

// Transition is the compare-and-set of a run's state; see run.Store.
//
// The state machine it serves is drawn in package run. Transition does not
// judge which edges are legal (callers name the states they expect in
// from); it keeps the timestamps: StartedAt is set the first time the run
// leaves queued for an active state (a run cancelled while queued never
// started), FinishedAt is set on every terminal state and cleared when a
// run leaves one (resume).
func (s *Store) Transition(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string) (*run.Run, error) {
	return s.TransitionWith(ctx, id, from, to, reason, msg, nil)
}

// TransitionWith is Transition that also applies fn (when not nil) to
// the record in the same write of run.json; see run.Store. fn runs
// before the state event is journaled.
//
// The journal and the record agree: the state event is appended first,
// under the journal's flock, which is held until run.json is written, and
// run.json is renamed into place only once the event is fsynced (the two
// fsyncs, the journal's and the new record's, run side by side); when
// the write fails (a full disk) or the fsync does, the journal is cut
// back to where it was, so a transition the record does not have is never
// journaled and a command that retries it appends nothing.
func (s *Store) TransitionWith(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string, fn func(r *run.Run) error) (*run.Run, error) {
	if !to.Valid() {
		return nil, fmt.Errorf("transition run %s: unknown state %q", id, to)
	}
	return s.modify(ctx, id, !to.Active(), func(r *run.Run, now time.Time) (*journalAppend, error) {
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
		e := run.Event{Time: now, Type: run.EventState, State: to, Reason: reason, Message: msg}
		tx, _, err := s.beginAppend(ctx, id, e, syncAsync)
		if err != nil {
			return nil, fmt.Errorf("transition run %s: %w", id, err)
		}
		r.Move(prev, to, reason, msg, now)
		return tx, nil
	})
}

// modify is the locked read-modify-write behind Update and Transition. A
// journal append that fn returns (its state event) must be fsynced before
// run.json is replaced; it is ended, kept or cut back, as run.json was
// written or not. durable says whether the rename of run.json is made
// durable (the directory fsynced) before modify returns (see the package
// doc: not for a move to an active state).
func (s *Store) modify(ctx context.Context, id string, durable bool, fn func(r *run.Run, now time.Time) (*journalAppend, error)) (*run.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := run.ValidateID(id); err != nil {
		return nil, err
	}
	lock, err := lockFile(ctx, s.L.RunLock(id), os.O_RDWR)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("run %s: %w", id, run.ErrNotFound)
		}
		return nil, fmt.Errorf("update run %s: %w", id, err)
	}
	defer lock.Close()
	next, err := s.read(id) // freshly decoded: fn's private copy
	if err != nil {
		return nil, err
	}
	seq, created, version := next.Seq, next.CreatedAt, next.Version
	now := time.Now().UTC()
	tx, err := fn(next, now)
	if err != nil {
		return nil, err
	}
	written := false
	var journaled func() error
	if tx != nil {
		defer func() { tx.end(written) }()
		journaled = func() error {
			if err := tx.wait(); err != nil {
				return fmt.Errorf("journal the state event: fsync: %w", err)
			}
			return nil
		}
	}
	next.ID, next.Seq, next.CreatedAt = id, seq, created
	next.Version = version + 1
	next.UpdatedAt = now
	data, err := encodeRun(next)
	if err != nil {
		return nil, fmt.Errorf("update run %s: %w", id, err)
	}
	if err := writeFileAtomic(s.L.RunJSON(id), data, journaled, durable); err != nil {
		written = errors.Is(err, errAfterRename)
		return nil, fmt.Errorf("update run %s: %w", id, err)
	}
	written = true
	return next, nil
}
