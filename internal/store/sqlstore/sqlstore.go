package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
)

// Store implements run.Store on a SQL database.
type Store struct {
	db  *sqldb.DB
	own bool // Close closes db
	// nextSeq is the statement that counts the submission sequence up
	// and returns the new value, inside a write transaction.
	nextSeq string
	// onEvent is told of each event inside the transaction that inserts
	// it (WithEventHook).
	onEvent EventHook
}

// EventHook is told of each event a run's journal receives, inside the
// write transaction that inserts it (e.Seq and e.Time set): an error rolls
// the event and whatever rides on it back. It must not begin another
// write transaction on the database (on SQLite they do not nest).
type EventHook func(ctx context.Context, tx *sql.Tx, id string, e run.Event) error

// WithEventHook returns a store on the same database whose inserted
// events are also given to h (the audit trail appends each in the same
// transaction). s is left as it is.
func (s *Store) WithEventHook(h EventHook) *Store {
	c := *s
	c.onEvent = h
	return &c
}

var _ run.JournaledStore = (*Store)(nil)

// Open opens the database at url (see sqldb.Connect), brings its schema
// up to date, and returns the store on it; Close closes the database.
func Open(ctx context.Context, url string) (*Store, error) {
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	s := New(db)
	s.own = true
	return s, nil
}

// New returns the store on db, whose schema is up to date (sqldb.Open).
// Close leaves db open.
func New(db *sqldb.DB) *Store {
	s := &Store{db: db}
	switch db.Dialect {
	case sqldb.Postgres:
		// A sequence takes no row lock: concurrent creates do not queue
		// behind each other's commits. Its numbers only grow (a rolled
		// back create leaves a gap).
		s.nextSeq = `SELECT nextval('run_seq')`
	default:
		// SQLite serialises writers anyway: a counter row, which rolls
		// back with a refused create.
		s.nextSeq = `UPDATE run_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq`
	}
	return s
}

// Close closes the database if Open opened it.
func (s *Store) Close() error {
	if s.own {
		return s.db.Close()
	}
	return nil
}

// repoKey is the form of a repository path kept in the repo column and
// compared by List, as the files store compares paths.
func repoKey(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Clean(p)
}

// Create stores a new run; see run.Store.
func (s *Store) Create(ctx context.Context, r *run.Run) error {
	if err := run.ValidateID(r.ID); err != nil {
		return err
	}
	c := *r
	c.Version = 1
	now := time.Now().UTC()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, s.nextSeq).Scan(&c.Seq); err != nil {
			return fmt.Errorf("seq: %w", err)
		}
		doc, err := json.Marshal(&c)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		// An id taken, also by a create racing this one, inserts nothing;
		// the rollback that follows takes SQLite's counter back.
		res, err := tx.ExecContext(ctx, `INSERT INTO runs (id, seq, state, repo, version, supervised, doc)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
			c.ID, c.Seq, string(c.State), repoKey(c.Repo), c.Version, c.Supervisor != nil, string(doc))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != 1 {
			return run.ErrExists
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	*r = c
	return nil
}

// Get returns the run with the full id; see run.Store.
func (s *Store) Get(ctx context.Context, id string) (*run.Run, error) {
	if err := run.ValidateID(id); err != nil {
		return nil, err
	}
	var seq, version int64
	var doc string
	err := s.db.Read().QueryRowContext(ctx, `SELECT seq, version, doc FROM runs WHERE id = $1`, id).Scan(&seq, &version, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, run.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", id, err)
	}
	return decodeRun(id, seq, version, doc)
}

// decodeRun turns a row into a Run. The columns seq and version are the
// truth (doc carries copies); a doc that does not decode, names another
// run or has an unknown state is a damaged record.
func decodeRun(id string, seq, version int64, doc string) (*run.Run, error) {
	r := new(run.Run)
	if err := json.Unmarshal([]byte(doc), r); err != nil {
		return nil, fmt.Errorf("run %s: record: %v: %w", id, err, run.ErrCorrupt)
	}
	if r.ID != id {
		return nil, fmt.Errorf("run %s: record names run %q: %w", id, r.ID, run.ErrCorrupt)
	}
	if !r.State.Valid() {
		// Not "active": an unknown state must not be taken for a run whose
		// supervisor died and be rewritten to interrupted.
		return nil, fmt.Errorf("run %s: record has an unknown state %q: %w", id, r.State, run.ErrCorrupt)
	}
	r.Seq, r.Version = seq, version
	return r, nil
}

// Resolve turns a unique prefix into a full id; see run.Store. Ids sort
// as bytes and hold only run.IDAlphabet, so the ids starting with prefix
// are those from prefix up to prefix+"~" ('~' sorts after every letter of
// the alphabet): an index range, not a scan.
func (s *Store) Resolve(ctx context.Context, prefix string) (string, error) {
	if err := run.ValidatePrefix(prefix); err != nil {
		return "", err
	}
	rows, err := s.db.Read().QueryContext(ctx, `SELECT id FROM runs WHERE id >= $1 AND id < $2 ORDER BY id`, prefix, prefix+"~")
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", prefix, err)
	}
	defer rows.Close()
	var match []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return "", fmt.Errorf("resolve %s: %w", prefix, err)
		}
		match = append(match, id)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("resolve %s: %w", prefix, err)
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("run %s: %w", prefix, run.ErrNotFound)
	case 1:
		return match[0], nil
	}
	return "", fmt.Errorf("%w: %q matches %s", run.ErrAmbiguous, prefix, strings.Join(match, ", "))
}

// List returns the matching runs newest first and the runs whose record
// cannot be read; see run.Store. The filter is applied to the columns, so
// a run whose record is damaged is reported only if its columns match.
func (s *Store) List(ctx context.Context, f run.Filter) ([]*run.Run, []run.Broken, error) {
	q := `SELECT id, seq, version, doc FROM runs`
	var where []string
	var args []any
	if len(f.States) > 0 {
		ph := make([]string, len(f.States))
		for i, st := range f.States {
			args = append(args, string(st))
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		where = append(where, "state IN ("+strings.Join(ph, ", ")+")")
	}
	if f.Repo != "" {
		args = append(args, repoKey(f.Repo))
		where = append(where, fmt.Sprintf("repo = $%d", len(args)))
	}
	if f.Taken {
		args = append(args, string(run.StateQueued))
		where = append(where, fmt.Sprintf("(state <> $%d OR supervised)", len(args)))
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC"
	rows, err := s.db.Read().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var runs []*run.Run
	var broken []run.Broken
	for rows.Next() {
		var id, doc string
		var seq, version int64
		if err := rows.Scan(&id, &seq, &version, &doc); err != nil {
			return nil, nil, fmt.Errorf("list runs: %w", err)
		}
		r, err := decodeRun(id, seq, version, doc)
		if err != nil {
			broken = append(broken, run.Broken{ID: id, Err: err.Error()})
			continue
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	slices.SortFunc(broken, func(a, b run.Broken) int { return strings.Compare(a.ID, b.ID) })
	return runs, broken, nil
}

// CountStates counts the runs in each state in one query, for a metrics
// scrape that would otherwise decode every record.
func (s *Store) CountStates(ctx context.Context) (map[run.State]int, error) {
	rows, err := s.db.Read().QueryContext(ctx, `SELECT state, count(*) FROM runs GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	n := map[run.State]int{}
	for rows.Next() {
		var st string
		var c int
		if err := rows.Scan(&st, &c); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		n[run.State(st)] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	return n, nil
}

// Delete removes the run and its journal (ON DELETE CASCADE); see
// run.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := run.ValidateID(id); err != nil {
		return err
	}
	res, err := s.db.Write().ExecContext(ctx, `DELETE FROM runs WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("run %s: %w", id, run.ErrNotFound)
	}
	return nil
}
