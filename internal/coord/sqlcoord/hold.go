package sqlcoord

import (
	"context"
	"fmt"

	"github.com/agentrun/agentrun/internal/run"
)

// Leases held on behalf of another holder (a team server holds the leases
// of the runs its agent hosts execute). Such a lease is not tracked here
// and not renewed by the renewal loop: it stays held only while its
// holder's renewals (RenewHolder, the host's heartbeats) keep coming, and
// once its expiry passes the next Acquire takes the row and counts the
// token up, as it does for a holder that died.

// HoldFor takes run id's lease for holder, for one TTL, without tracking
// it: (token, true), or (0, false) while a live holder keeps it.
func (c *Coordinator) HoldFor(ctx context.Context, id, holder string) (int64, bool, error) {
	if err := run.ValidateID(id); err != nil {
		return 0, false, fmt.Errorf("hold: %w", err)
	}
	token, ok, err := c.take(ctx, id, holder)
	if err != nil {
		return 0, false, fmt.Errorf("hold %s: %w", id, err)
	}
	return token, ok, nil
}

// RenewHolder pushes out by one TTL the expiry of every unexpired lease of
// holder, and returns them (run id -> token). A lease whose expiry passed
// is not renewed back: another holder may have it.
func (c *Coordinator) RenewHolder(ctx context.Context, holder string) (map[string]int64, error) {
	now := c.db.NowMicros()
	rows, err := c.db.Write().QueryContext(ctx, `UPDATE coord_leases SET expires_at = `+now+` + $2
		WHERE holder = $1 AND expires_at > `+now+` RETURNING run_id, token`, holder, c.ttlMicros())
	if err != nil {
		return nil, fmt.Errorf("renew %s: %w", holder, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var token int64
		if err := rows.Scan(&id, &token); err != nil {
			return nil, fmt.Errorf("renew %s: %w", holder, err)
		}
		out[id] = token
	}
	return out, rows.Err()
}

// DropFor releases run id's lease if holder still has it with token.
func (c *Coordinator) DropFor(ctx context.Context, id string, token int64, holder string) error {
	_, err := c.db.Write().ExecContext(ctx, `UPDATE coord_leases SET holder = NULL, expires_at = NULL
		WHERE run_id = $1 AND token = $2 AND holder = $3`, id, token, holder)
	if err != nil {
		return fmt.Errorf("drop %s: %w", id, err)
	}
	return nil
}

// HeldBy reports whether holder has run id's lease with token and its
// expiry has not passed: the fencing check of a write made for holder.
func (c *Coordinator) HeldBy(ctx context.Context, id string, token int64, holder string) (bool, error) {
	var n int
	err := c.db.Read().QueryRowContext(ctx, `SELECT COUNT(*) FROM coord_leases
		WHERE run_id = $1 AND token = $2 AND holder = $3 AND expires_at > `+c.db.NowMicros(), id, token, holder).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("held %s: %w", id, err)
	}
	return n > 0, nil
}
