// Package sqldb is the SQL database that Full mode keeps its state in:
// one schema for the run store (internal/store/sqlstore) and the
// coordinator (internal/coord/sqlcoord), on SQLite (one host, pure Go:
// modernc.org/sqlite, so CGO_ENABLED=0 builds stay) or PostgreSQL (several
// hosts: pgx through database/sql).
//
// It opens a database from a URL (sqlite:PATH, postgres://...), applies
// the versioned migrations embedded under migrations/<dialect>/ (each an
// up and a down file, recorded in schema_version, each in a transaction),
// and gives the two packages above what differs between the dialects:
// write transactions (InTx), the database's clock (NowMicros) and the row
// locking clauses. Queries use $1, $2 placeholders, which both drivers
// accept.
//
// Concurrency: on SQLite every write goes through one connection per
// process and file, shared by every DB open on the file, in transactions
// that take the write lock at BEGIN (IMMEDIATE), and busy_timeout makes
// other processes sharing the file wait for it; reads use a small pool
// beside it (WAL mode). So a write made while the same goroutine holds a
// write transaction on the same file (from inside InTx's fn) waits for the
// connection that transaction holds: on SQLite, write transactions must
// not nest. On PostgreSQL transactions
// run at READ COMMITTED and serialise on row locks; a transaction the
// server aborts as a deadlock victim or for a serialization failure is
// run again.
//
// Why these parts: modernc.org/sqlite is SQLite's C translated to Go, so
// it builds with CGO_ENABLED=0 for every target the binary has (Linux and
// macOS) and runs without a WebAssembly runtime (ncruces/go-sqlite3 embeds
// one). The migrations are hand-written (migrate.go, a page): golang-migrate
// would bring a driver module per database and a version table of its own
// semantics, for what is here a loop over embedded files.
//
// What it must never do: run against a schema newer than it knows (Migrate
// refuses), or put a password from a URL in an error.
package sqldb
