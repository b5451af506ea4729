// Package sqlaudit keeps the audit trail (internal/audit) in the team
// server's SQL database (internal/sqldb), beside the runs:
//
//	audit_entries      the chain, one row per entry, keyed by seq
//	audit_head         one row: the last entry's seq and hash; locking it
//	                   serialises appends
//	audit_checkpoints  the signed checkpoints, keyed by seq
//
// An append reads the head with its row locked (SELECT ... FOR UPDATE on
// PostgreSQL; SQLite's write transactions hold the whole database),
// inserts the entry after it and moves the head, in one transaction: two
// writers, also in two server processes on one PostgreSQL, never chain to
// the same entry. The time is the database's clock, the one clock all
// hosts share. AppendTx does the same inside a caller's transaction: the
// run store appends a run's event and its audit entry in one (see
// RunEvents), so neither is ever written without the other.
//
// The trail never names a run by foreign key: deleting a run leaves its
// entries.
package sqlaudit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
)

// Page sizes of Entries and Checkpoints.
const (
	DefaultLimit = 1000
	MaxLimit     = 10000
)

// Log is audit.Log on a database whose schema is up to date.
type Log struct{ db *sqldb.DB }

var _ audit.Log = (*Log)(nil)

// New returns the trail kept in db.
func New(db *sqldb.DB) *Log { return &Log{db: db} }

// Append adds an entry in a transaction of its own; see audit.Log.
func (l *Log) Append(ctx context.Context, e audit.Entry) (audit.Entry, error) {
	var out audit.Entry
	err := l.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.AppendTx(ctx, tx, e)
		return err
	})
	if err != nil {
		return e, err
	}
	return out, nil
}

// AppendTx adds an entry inside tx, a write transaction of l's database:
// the entry commits or rolls back with it. The head's row stays locked
// until tx ends.
func (l *Log) AppendTx(ctx context.Context, tx *sql.Tx, e audit.Entry) (audit.Entry, error) {
	var seq, now int64
	var hash string
	err := tx.QueryRowContext(ctx, `SELECT seq, hash, `+l.db.NowMicros()+` FROM audit_head WHERE id = 1`+l.db.ForUpdate()).Scan(&seq, &hash, &now)
	if err != nil {
		return e, fmt.Errorf("audit: read the head: %w", err)
	}
	c, err := audit.Chain(e, seq, hash, time.UnixMicro(now))
	if err != nil {
		return e, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_entries (seq, time, actor, action, run_id, payload, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, c.Seq, c.Time, c.Actor, c.Action, c.Run, string(c.Payload), c.PrevHash, c.Hash); err != nil {
		return e, fmt.Errorf("audit: append entry %d: %w", c.Seq, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1`, c.Seq, c.Hash); err != nil {
		return e, fmt.Errorf("audit: move the head: %w", err)
	}
	return c, nil
}

func limit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// Entries returns the entries q selects; see audit.Log.
func (l *Log) Entries(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	where := []string{"seq > $1"}
	args := []any{q.After}
	if q.Run != "" {
		args = append(args, q.Run)
		where = append(where, "run_id = $2")
	}
	args = append(args, limit(q.Limit))
	rows, err := l.db.Read().QueryContext(ctx, `SELECT seq, time, actor, action, run_id, payload, prev_hash, hash FROM audit_entries
		WHERE `+strings.Join(where, " AND ")+fmt.Sprintf(` ORDER BY seq LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("audit: read entries: %w", err)
	}
	defer rows.Close()
	out := []audit.Entry{}
	for rows.Next() {
		var e audit.Entry
		var payload string
		if err := rows.Scan(&e.Seq, &e.Time, &e.Actor, &e.Action, &e.Run, &payload, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("audit: read entries: %w", err)
		}
		// Returned as stored, valid JSON or not: the verifier hashes the
		// bytes and says what is wrong.
		e.Payload = rawJSON(payload)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read entries: %w", err)
	}
	return out, nil
}

// rawJSON is s as a JSON value: itself when it is valid JSON, else a
// JSON string of it (an edited payload may be anything; it must still
// reach the verifier, which then finds the hash does not match).
func rawJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// Checkpoints returns the checkpoints after seq after; see audit.Log.
func (l *Log) Checkpoints(ctx context.Context, after int64, n int) ([]audit.Checkpoint, error) {
	rows, err := l.db.Read().QueryContext(ctx, `SELECT seq, hash, time, key, signature FROM audit_checkpoints
		WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit(n))
	if err != nil {
		return nil, fmt.Errorf("audit: read checkpoints: %w", err)
	}
	defer rows.Close()
	out := []audit.Checkpoint{}
	for rows.Next() {
		var c audit.Checkpoint
		if err := rows.Scan(&c.Seq, &c.Hash, &c.Time, &c.Key, &c.Signature); err != nil {
			return nil, fmt.Errorf("audit: read checkpoints: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read checkpoints: %w", err)
	}
	return out, nil
}

// Head returns the last entry's seq and the last checkpoint's.
func (l *Log) Head(ctx context.Context) (int64, int64, error) {
	var head, sealed int64
	err := l.db.Read().QueryRowContext(ctx, `SELECT (SELECT seq FROM audit_head WHERE id = 1),
		(SELECT COALESCE(MAX(seq), 0) FROM audit_checkpoints)`).Scan(&head, &sealed)
	if err != nil {
		return 0, 0, fmt.Errorf("audit: read the head: %w", err)
	}
	return head, sealed, nil
}

// Seal writes a checkpoint of the head signed by s; see audit.Log. The
// head is read with its row locked, so the checkpoint names the entry
// that is the head when it commits. Two servers sealing one head write
// one checkpoint.
func (l *Log) Seal(ctx context.Context, s audit.Signer) (audit.Checkpoint, bool, error) {
	var cp audit.Checkpoint
	ok := false
	err := l.db.InTx(ctx, func(tx *sql.Tx) error {
		ok = false
		var now int64
		err := tx.QueryRowContext(ctx, `SELECT seq, hash, `+l.db.NowMicros()+` FROM audit_head WHERE id = 1`+l.db.ForUpdate()).Scan(&cp.Seq, &cp.Hash, &now)
		if err != nil {
			return fmt.Errorf("audit: read the head: %w", err)
		}
		if cp.Seq == 0 {
			return nil
		}
		cp.Time = audit.FormatTime(time.UnixMicro(now))
		cp = s.Sign(cp)
		res, err := tx.ExecContext(ctx, `INSERT INTO audit_checkpoints (seq, hash, time, key, signature) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (seq) DO NOTHING`, cp.Seq, cp.Hash, cp.Time, cp.Key, cp.Signature)
		if err != nil {
			return fmt.Errorf("audit: checkpoint %d: %w", cp.Seq, err)
		}
		n, err := res.RowsAffected()
		ok = err == nil && n == 1
		return err
	})
	return cp, ok, err
}

// RunEvents is the run store's event hook (sqlstore.Store.WithEventHook):
// each event a run's journal receives is appended as the entry
// "run.<type>" of actor, with the event as its payload, in the
// transaction that writes the event.
func (l *Log) RunEvents(actor string) func(ctx context.Context, tx *sql.Tx, id string, e run.Event) error {
	return func(ctx context.Context, tx *sql.Tx, id string, e run.Event) error {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("audit: event of run %s: %w", id, err)
		}
		_, err = l.AppendTx(ctx, tx, audit.Entry{Actor: actor, Action: "run." + e.Type, Run: id, Payload: b})
		return err
	}
}
