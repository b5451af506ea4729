package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
)

// pollHeld is how often Acquire tries a held lease again while it waits.
const pollHeld = 5 * time.Millisecond

// lease is one acquisition of a run's row in coord_leases.
type lease struct {
	c     *Coordinator
	id    string
	token int64

	mu       sync.Mutex
	released bool
	lost     bool
}

func (l *lease) RunID() string { return l.id }
func (l *lease) Token() int64  { return l.token }

// Release frees the row if it is still this acquisition's. The lease
// counts as released here even when the statement fails: it is no longer
// renewed, so the row frees itself once its expiry passes.
func (l *lease) Release() error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	l.c.untrack(l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := l.c.db.Write().ExecContext(ctx, `UPDATE coord_leases SET holder = NULL, expires_at = NULL
		WHERE run_id = $1 AND token = $2 AND holder = $3`, l.id, l.token, l.c.holder)
	if err != nil {
		return fmt.Errorf("release %s: %w", l.id, err)
	}
	return nil
}

func (l *lease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.c.untrack(l, nil)
}

// usable is nil for a lease that is neither released nor known lost.
func (l *lease) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		return fmt.Errorf("run %s: %w", l.id, coord.ErrReleased)
	case l.lost:
		return lostErr(l.id)
	}
	return nil
}

func lostErr(id string) error {
	return fmt.Errorf("run %s: %w (%w)", id, ErrLost, coord.ErrReleased)
}

// own checks that cl is a usable lease made by c.
func (c *Coordinator) own(cl coord.Lease) (*lease, error) {
	l, ok := cl.(*lease)
	if !ok || l == nil || l.c != c {
		return nil, fmt.Errorf("a lease not made by this coordinator (%s)", c.holder)
	}
	return l, l.usable()
}

// Acquire takes run id's lease (see coord.Coordinator), trying every
// pollHeld until wait has passed. One statement both takes a free or
// expired row and counts its token up, or finds it held and changes
// nothing.
func (c *Coordinator) Acquire(ctx context.Context, id string, wait time.Duration) (coord.Lease, error) {
	if err := run.ValidateID(id); err != nil {
		return nil, fmt.Errorf("acquire: %w", err)
	}
	deadline := time.Now().Add(wait)
	var t *time.Timer
	for {
		if c.isClosed() {
			return nil, fmt.Errorf("acquire %s: %w", id, errClosed)
		}
		l, err := c.tryAcquire(ctx, id)
		if err != nil || l != nil {
			return l, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("run %s: %w", id, coord.ErrHeld)
		}
		if t == nil {
			t = time.NewTimer(min(pollHeld, left))
			defer t.Stop()
		} else {
			t.Reset(min(pollHeld, left))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("acquire %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// take takes run id's lease row for holder, for one TTL, counting its
// fencing token up: (token, true), or (0, false) while a live holder
// keeps it.
func (c *Coordinator) take(ctx context.Context, id, holder string) (int64, bool, error) {
	now := c.db.NowMicros()
	var token int64
	err := c.db.Write().QueryRowContext(ctx, `INSERT INTO coord_leases (run_id, token, holder, expires_at)
		VALUES ($1, 1, $2, `+now+` + $3)
		ON CONFLICT (run_id) DO UPDATE SET token = coord_leases.token + 1, holder = excluded.holder, expires_at = excluded.expires_at
		WHERE coord_leases.holder IS NULL OR coord_leases.expires_at <= `+now+`
		RETURNING token`, id, holder, c.ttlMicros()).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// tryAcquire makes one attempt: the lease, or nil while another holds it.
func (c *Coordinator) tryAcquire(ctx context.Context, id string) (*lease, error) {
	token, ok, err := c.take(ctx, id, c.holder)
	if err == nil && !ok {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("acquire %s: %w", id, ctx.Err())
		}
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	l := &lease{c: c, id: id, token: token}
	if !c.track(l, nil) {
		_ = l.Release()
		return nil, fmt.Errorf("acquire %s: %w", id, errClosed)
	}
	return l, nil
}

// Held reports whether a holder has run id's lease and its expiry has not
// passed; it reads and takes nothing.
func (c *Coordinator) Held(ctx context.Context, id string) (bool, error) {
	if err := run.ValidateID(id); err != nil {
		return false, fmt.Errorf("held: %w", err)
	}
	var n int
	err := c.db.Read().QueryRowContext(ctx, `SELECT COUNT(*) FROM coord_leases
		WHERE run_id = $1 AND holder IS NOT NULL AND expires_at > `+c.db.NowMicros(), id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("held %s: %w", id, err)
	}
	return n > 0, nil
}
