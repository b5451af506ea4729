package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Dialect is the kind of database behind a DB.
type Dialect int

const (
	SQLite Dialect = iota + 1
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "SQLite"
	case Postgres:
		return "PostgreSQL"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// busyTimeout is how long a SQLite statement waits for another
// connection's write lock (another process sharing the file) before it
// fails with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// readConns is the size of the SQLite read pool: WAL readers do not block
// each other nor the writer.
const readConns = 4

// pgConns bounds one process's connections to PostgreSQL.
const pgConns = 16

// DB is an open database of either dialect. It is safe for concurrent use.
type DB struct {
	Dialect Dialect
	read    *sql.DB
	write   *sql.DB // the read pool itself on PostgreSQL
	file    string  // SQLite: the key of the shared writer

	closeOnce sync.Once
	closeErr  error
}

// writers are the SQLite write connections of this process, one per
// database file, shared by every DB open on it. Two connections of one
// process writing the same file would meet only in SQLite's busy handler,
// which sleeps and polls: under steady contention a writer can wait past
// busy_timeout while others keep taking the lock between its polls. One
// shared connection makes them queue in database/sql instead, and leaves
// the busy handler to other processes.
var writers = struct {
	sync.Mutex
	m map[string]*sharedWriter
}{m: map[string]*sharedWriter{}}

type sharedWriter struct {
	db   *sql.DB
	refs int
}

// Open connects to the database named by rawURL and brings its schema to
// the latest version (Migrate). See Connect for the URLs.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	db, err := Connect(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, Latest); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Connect opens the database named by rawURL without touching its schema:
//
//	sqlite:/path/to/agentrun.db   a SQLite file (made if missing), also sqlite:///path
//	postgres://user@host/db?...   PostgreSQL (postgresql:// too), as pgx reads it
func Connect(ctx context.Context, rawURL string) (*DB, error) {
	var db *DB
	switch {
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		var err error
		if db, err = openSQLite(path); err != nil {
			return nil, err
		}
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		cfg, err := pgx.ParseConfig(rawURL)
		if err != nil {
			return nil, fmt.Errorf("database url: %w", err)
		}
		pool := stdlib.OpenDB(*cfg)
		pool.SetMaxOpenConns(pgConns)
		pool.SetMaxIdleConns(pgConns)
		db = &DB{Dialect: Postgres, read: pool, write: pool}
	default:
		return nil, fmt.Errorf("database url %q: want sqlite:PATH or postgres://", redact(rawURL))
	}
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s database: %w", db.Dialect, err)
	}
	return db, nil
}

// openSQLite opens the file at path with two pools: one connection for
// every write (shared with every DB of this process on the same file; see
// writers), whose transactions begin IMMEDIATE (they take the write
// lock at BEGIN, so a read-then-write transaction never fails half way on
// a lock it cannot upgrade), and a few for reads. In one process writers
// then queue for the one connection instead of polling the file lock;
// between processes busy_timeout makes them wait for it. WAL lets readers
// run beside the writer; synchronous=FULL fsyncs every commit, as the files
// store fsyncs every write.
func openSQLite(path string) (*DB, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("database url: SQLite path %q is empty or holds ? or #", path)
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	dsn := "file:" + path + "?" + q.Encode()
	read, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	read.SetConnMaxLifetime(0)
	q.Set("_txlock", "immediate")
	key := path
	if abs, err := filepath.Abs(path); err == nil {
		key = abs
	}
	if real, err := filepath.EvalSymlinks(key); err == nil {
		key = real
	}
	writers.Lock()
	defer writers.Unlock()
	w := writers.m[key]
	if w == nil {
		write, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
		if err != nil {
			read.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		write.SetMaxOpenConns(1)
		write.SetMaxIdleConns(1)
		write.SetConnMaxLifetime(0)
		w = &sharedWriter{db: write}
		writers.m[key] = w
	}
	w.refs++
	return &DB{Dialect: SQLite, read: read, write: w.db, file: key}, nil
}

// redact drops the password from a URL for error messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// Close closes the pools (a shared SQLite writer once its last DB
// closes). Idempotent.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closeErr = db.read.Close()
		if db.file == "" {
			return
		}
		writers.Lock()
		defer writers.Unlock()
		if w := writers.m[db.file]; w != nil {
			if w.refs--; w.refs == 0 {
				delete(writers.m, db.file)
				db.closeErr = errors.Join(db.closeErr, w.db.Close())
			}
		}
	})
	return db.closeErr
}

// Read is the pool for statements that only read.
func (db *DB) Read() *sql.DB { return db.read }

// Write is the pool for statements that write outside a transaction of
// InTx (single statements, committed on their own).
func (db *DB) Write() *sql.DB { return db.write }

// maxRetries bounds how often InTx runs fn again after PostgreSQL aborted
// the transaction for a deadlock or a serialization failure.
const maxRetries = 10

// InTx runs fn in a write transaction and commits it if fn returns nil;
// fn's error is returned unchanged after a rollback. On SQLite the
// transaction holds the database's write lock from its BEGIN, so
// transactions are serialised whole. On PostgreSQL it runs at READ
// COMMITTED and serialises through the row locks its statements take
// (SELECT ... FOR UPDATE); when the server aborts it as a deadlock victim
// or for a serialization failure, fn runs again in a new transaction, so
// fn must do nothing outside tx that it cannot do twice.
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := db.tryTx(ctx, fn)
		if err == nil || attempt >= maxRetries || !Retryable(err) {
			return err
		}
		d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
	}
}

// Tx is InTx without the retries: one attempt, whose error, a
// Retryable one too, is returned to a caller that would rather try again
// later than run fn twice now.
func (db *DB) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error { return db.tryTx(ctx, fn) }

func (db *DB) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Retryable reports a PostgreSQL error that aborted a transaction which
// succeeds if tried again: a deadlock or a serialization failure.
func Retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == "40001" || pe.Code == "40P01"
}

// NowMicros is an SQL expression for the database's clock in microseconds
// since the Unix epoch (a BIGINT). Leases compare expiries on this one
// clock, so hosts sharing a database need not agree on the time.
func (db *DB) NowMicros() string {
	if db.Dialect == Postgres {
		return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
	}
	return "CAST(unixepoch('subsec') * 1000000 AS INTEGER)"
}

// ForUpdate is the clause that locks the rows a SELECT returns until the
// transaction ends (" FOR UPDATE"), or nothing on SQLite, whose write
// transactions hold the whole database.
func (db *DB) ForUpdate() string {
	if db.Dialect == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// ForUpdateSkipLocked is ForUpdate that passes over rows another
// transaction has locked instead of waiting for them.
func (db *DB) ForUpdateSkipLocked() string {
	if db.Dialect == Postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// ping connects. A new SQLite file that several processes open at once
// may answer SQLITE_BUSY to the first connection's switch to WAL without
// calling the busy handler (the switch needs the file to itself): that
// connection tries again, within busyTimeout.
func ping(ctx context.Context, db *DB) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		err := db.read.PingContext(ctx)
		var coded interface{ Code() int }
		if err == nil || db.Dialect != SQLite || !errors.As(err, &coded) || coded.Code()&0xff != 5 || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
