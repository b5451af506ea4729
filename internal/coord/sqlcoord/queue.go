package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
)

// Enqueue makes (or renews) the run's entry at seq, carrying the lease's
// token, in one statement that inserts nothing unless the lease is still
// this holder's and unexpired. An entry counts only while the lease that
// made it is held: a later holder of the run's lease does not revive it
// without queueing again, and a sweep that judged the entry dead deletes
// it only if its token is still the dead one.
func (c *Coordinator) Enqueue(ctx context.Context, cl coord.Lease, seq int64) error {
	l, err := c.own(cl)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if seq < 0 {
		return fmt.Errorf("enqueue %s: negative seq %d", l.id, seq)
	}
	res, err := c.db.Write().ExecContext(ctx, `INSERT INTO coord_queue (seq, run_id, token)
		SELECT $1, run_id, token FROM coord_leases
		WHERE run_id = $2 AND token = $3 AND holder = $4 AND expires_at > `+c.db.NowMicros()+`
		ON CONFLICT (seq, run_id) DO UPDATE SET token = excluded.token`, seq, l.id, l.token, c.holder)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", l.id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", l.id, err)
	}
	if n == 0 {
		l.markLost()
		return fmt.Errorf("enqueue: %w", lostErr(l.id))
	}
	return nil
}

// Dequeue removes the run's entry at seq, if there is one.
func (c *Coordinator) Dequeue(ctx context.Context, id string, seq int64) error {
	if err := run.ValidateID(id); err != nil {
		return fmt.Errorf("dequeue: %w", err)
	}
	if _, err := c.db.Write().ExecContext(ctx, `DELETE FROM coord_queue WHERE run_id = $1 AND seq = $2`, id, seq); err != nil {
		return fmt.Errorf("dequeue %s: %w", id, err)
	}
	return nil
}

// TrySlot makes one attempt at a slot (see coord.Coordinator) in one
// transaction: the lease's row is checked and locked (on SQLite the
// transaction holds the write lock from its BEGIN: every TrySlot and
// Enqueue wait for it), admit is asked, the queue is looked at for an
// older waiter, and the lowest free slot row below max is taken in one
// statement (its pick FOR UPDATE SKIP LOCKED: a slot another TrySlot is
// taking counts as taken). The queue comes before the slot (the flock
// coordinator looks the other way round) so that runs that must wait
// anyway never lock a slot row that the run whose turn it is would then
// skip. A transaction PostgreSQL aborts (a deadlock) takes nothing and
// counts as "not now": the caller tries again, and admit is never asked
// twice in one call.
func (c *Coordinator) TrySlot(ctx context.Context, cl coord.Lease, seq int64, max int, admit func(context.Context) error) (coord.Slot, error) {
	l, err := c.own(cl)
	if err != nil {
		return nil, fmt.Errorf("slot: %w", err)
	}
	n := max
	if n < 1 {
		n = 1
	}
	if err := c.makeSlots(ctx, n); err != nil {
		return nil, err
	}
	var got *slot
	var fromAdmit, lost error
	err = c.db.Tx(ctx, func(tx *sql.Tx) error {
		now := c.db.NowMicros()
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM coord_leases
			WHERE run_id = $1 AND token = $2 AND holder = $3 AND expires_at > `+now+c.db.ForUpdate(), l.id, l.token, c.holder).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			lost = lostErr(l.id)
			return lost
		}
		if err != nil {
			return err
		}
		if admit != nil {
			if err := admit(ctx); err != nil {
				fromAdmit = err
				return err
			}
		}
		older, err := c.olderWaiting(ctx, tx, l.id, seq)
		if err != nil || older {
			return err // an older run goes first; the sweep is kept
		}
		var k int
		var gen int64
		err = tx.QueryRowContext(ctx, `UPDATE coord_slots SET gen = gen + 1, holder = $2, run_id = $3, expires_at = `+now+` + $4
			WHERE k = (SELECT k FROM coord_slots WHERE k < $1 AND (holder IS NULL OR expires_at <= `+now+`)
				ORDER BY k LIMIT 1`+c.db.ForUpdateSkipLocked()+`)
			RETURNING k, gen`, n, c.holder, l.id, c.ttlMicros()).Scan(&k, &gen)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // none free: not now
		}
		if err != nil {
			return err
		}
		got = &slot{c: c, k: k, gen: gen}
		return nil
	})
	switch {
	case fromAdmit != nil:
		return nil, fromAdmit
	case lost != nil:
		l.markLost()
		return nil, fmt.Errorf("slot: %w", lost)
	case sqldb.Retryable(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("slot for %s: %w", l.id, err)
	case got == nil:
		return nil, nil
	}
	if !c.track(nil, got) {
		_ = got.Release()
		return nil, fmt.Errorf("slot for %s: %w", l.id, errClosed)
	}
	return got, nil
}

// makeSlots makes sure slot rows 0..n-1 exist. Rows are only ever added;
// a smaller max leaves the higher rows unused.
func (c *Coordinator) makeSlots(ctx context.Context, n int) error {
	c.mu.Lock()
	made := c.slotsMade
	c.mu.Unlock()
	if n <= made {
		return nil
	}
	vals := make([]string, 0, n-made)
	args := make([]any, 0, n-made)
	for k := made; k < n; k++ {
		args = append(args, k)
		vals = append(vals, fmt.Sprintf("($%d)", len(args)))
	}
	if _, err := c.db.Write().ExecContext(ctx, `INSERT INTO coord_slots (k) VALUES `+strings.Join(vals, ", ")+
		` ON CONFLICT (k) DO NOTHING`, args...); err != nil {
		return fmt.Errorf("slot rows: %w", err)
	}
	c.mu.Lock()
	c.slotsMade = max(c.slotsMade, n)
	c.mu.Unlock()
	return nil
}

// sweepBatch bounds the entries one look at the queue reads.
const sweepBatch = 100

// olderWaiting reports whether a run other than id, queued before seq,
// still waits with the lease that queued it held, so it must start first.
// The dead entries it meets on the way (their lease released, expired or
// since taken by a holder that did not queue again) are deleted in tx.
func (c *Coordinator) olderWaiting(ctx context.Context, tx *sql.Tx, id string, seq int64) (bool, error) {
	now := c.db.NowMicros()
	rows, err := tx.QueryContext(ctx, `SELECT q.seq, q.run_id, q.token,
			CASE WHEN l.holder IS NOT NULL AND l.expires_at > `+now+` AND l.token = q.token THEN 1 ELSE 0 END
		FROM coord_queue q LEFT JOIN coord_leases l ON l.run_id = q.run_id
		WHERE q.seq < $1 AND q.run_id <> $2 ORDER BY q.seq, q.run_id LIMIT `+fmt.Sprint(sweepBatch), seq, id)
	if err != nil {
		return false, fmt.Errorf("queue: %w", err)
	}
	type entry struct {
		seq   int64
		id    string
		token int64
	}
	var dead []entry
	older := false
	for rows.Next() {
		var e entry
		var live int
		if err := rows.Scan(&e.seq, &e.id, &e.token, &live); err != nil {
			rows.Close()
			return false, fmt.Errorf("queue: %w", err)
		}
		if live == 1 {
			older = true
			break
		}
		dead = append(dead, e)
	}
	if err := rows.Close(); err != nil {
		return false, fmt.Errorf("queue: %w", err)
	}
	if len(dead) == sweepBatch {
		older = true // more may wait behind them: sweep these, look again next time
	}
	for _, e := range dead {
		if _, err := tx.ExecContext(ctx, `DELETE FROM coord_queue WHERE seq = $1 AND run_id = $2 AND token = $3`,
			e.seq, e.id, e.token); err != nil {
			return false, fmt.Errorf("queue: sweep: %w", err)
		}
	}
	return older, nil
}

// slot is one take of a row of coord_slots.
type slot struct {
	c   *Coordinator
	k   int
	gen int64

	mu   sync.Mutex
	done bool
}

// Release frees the row if it is still this take's. Like a lease's, the
// slot counts as released here even when the statement fails: it is no
// longer renewed and frees itself at its expiry.
func (s *slot) Release() error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.done = true
	s.mu.Unlock()
	s.c.untrack(nil, s)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := s.c.db.Write().ExecContext(ctx, `UPDATE coord_slots SET holder = NULL, run_id = NULL, expires_at = NULL
		WHERE k = $1 AND gen = $2 AND holder = $3`, s.k, s.gen, s.c.holder)
	if err != nil {
		return fmt.Errorf("release slot %d: %w", s.k, err)
	}
	return nil
}

// markLost stops renewing a slot whose expiry passed: another run may
// hold the row now, and Release must not free that take (gen differs).
func (s *slot) markLost() { s.c.untrack(nil, s) }
