package sqldb

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The schema is versioned SQL under migrations/<dialect>/, one pair of
// files per version:
//
//	0001_runs.up.sql     takes the schema from version 0 to 1
//	0001_runs.down.sql   takes it back from 1 to 0
//
// The versions applied are rows of schema_version. Each step runs in its
// own transaction with its row, so a step is applied whole or not at all
// (both dialects have transactional DDL). Steps are serialised between
// processes: by the write lock on SQLite, by an advisory lock on
// PostgreSQL, taken before schema_version is even looked at.
//
//go:embed migrations
var migrationFS embed.FS

// Latest, as a target of Migrate, is the newest version this binary knows.
const Latest = -1

// migrateLock is the key of PostgreSQL's advisory lock around migrations
// (any constant: it only has to be the same in every process).
const migrateLock = 0x6167656e7472756e // "agentrun"

// Migration is one version of the schema.
type Migration struct {
	Version  int
	Name     string
	Up, Down string
}

// Migrations are the dialect's schema versions in order, 1, 2, ...
func Migrations(d Dialect) ([]Migration, error) {
	dir := map[Dialect]string{SQLite: "migrations/sqlite", Postgres: "migrations/postgres"}[d]
	ents, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations of %s: %w", d, err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range ents {
		base, dir0, ok := splitMigration(e.Name())
		if !ok {
			return nil, fmt.Errorf("migrations of %s: %s is not NNNN_name.up.sql or .down.sql", d, e.Name())
		}
		v, name := base.version, base.name
		b, err := fs.ReadFile(migrationFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m := byVersion[v]
		if m == nil {
			m = &Migration{Version: v, Name: name}
			byVersion[v] = m
		}
		if m.Name != name {
			return nil, fmt.Errorf("migrations of %s: version %d is named %q and %q", d, v, m.Name, name)
		}
		if dir0 == "up" {
			m.Up = string(b)
		} else {
			m.Down = string(b)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for v := 1; v <= len(byVersion); v++ {
		m := byVersion[v]
		if m == nil || m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migrations of %s: version %d lacks its up or down file (versions are 1..n)", d, v)
		}
		out = append(out, *m)
	}
	return out, nil
}

type migrationName struct {
	version int
	name    string
}

// splitMigration parses "0001_runs.up.sql" into (1, "runs"), "up".
func splitMigration(file string) (migrationName, string, bool) {
	rest, ok := strings.CutSuffix(file, ".sql")
	if !ok {
		return migrationName{}, "", false
	}
	var dir string
	switch {
	case strings.HasSuffix(rest, ".up"):
		dir, rest = "up", strings.TrimSuffix(rest, ".up")
	case strings.HasSuffix(rest, ".down"):
		dir, rest = "down", strings.TrimSuffix(rest, ".down")
	default:
		return migrationName{}, "", false
	}
	num, name, ok := strings.Cut(rest, "_")
	v, err := strconv.Atoi(num)
	if !ok || err != nil || v < 1 || name == "" {
		return migrationName{}, "", false
	}
	return migrationName{v, name}, dir, true
}

const createVersionTable = `CREATE TABLE IF NOT EXISTS schema_version (
	version INTEGER PRIMARY KEY,
	name TEXT NOT NULL,
	applied_at TEXT NOT NULL
)`

// Version is the schema's current version (0: none applied).
func (db *DB) Version(ctx context.Context) (int, error) {
	var v int
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		v, err = db.lockedVersion(ctx, tx)
		return err
	})
	return v, err
}

// lockedVersion takes the migration lock in tx, makes schema_version if
// missing, and reads the current version.
func (db *DB) lockedVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	if db.Dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return 0, fmt.Errorf("schema lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, createVersionTable); err != nil {
		return 0, fmt.Errorf("schema_version: %w", err)
	}
	var v sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema_version: %w", err)
	}
	return int(v.Int64), nil
}

// Migrate brings the schema to version target (Latest: the newest known),
// applying up steps or down steps one at a time. A database whose schema
// is newer than this binary knows is refused, not touched: its data may
// mean what this binary cannot tell.
func (db *DB) Migrate(ctx context.Context, target int) error {
	ms, err := Migrations(db.Dialect)
	if err != nil {
		return err
	}
	if target == Latest {
		target = len(ms)
	}
	if target < 0 || target > len(ms) {
		return fmt.Errorf("migrate: no schema version %d (this binary knows 0..%d)", target, len(ms))
	}
	for {
		done := false
		err := db.InTx(ctx, func(tx *sql.Tx) error {
			cur, err := db.lockedVersion(ctx, tx)
			if err != nil {
				return err
			}
			switch {
			case cur > len(ms):
				return fmt.Errorf("the database schema is at version %d, newer than this binary knows (%d): use a newer agentrun", cur, len(ms))
			case cur == target:
				done = true
				return nil
			case cur < target:
				return db.step(ctx, tx, ms[cur], true)
			default:
				return db.step(ctx, tx, ms[cur-1], false)
			}
		})
		if err != nil || done {
			return err
		}
	}
}

// step applies m's up or down SQL in tx and records it.
func (db *DB) step(ctx context.Context, tx *sql.Tx, m Migration, up bool) error {
	what, script := "up", m.Up
	if !up {
		what, script = "down", m.Down
	}
	for _, stmt := range statements(script) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migration %04d_%s %s: %w", m.Version, m.Name, what, err)
		}
	}
	var err error
	if up {
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.Version, m.Name, time.Now().UTC().Format(time.RFC3339Nano))
	} else {
		_, err = tx.ExecContext(ctx, `DELETE FROM schema_version WHERE version = $1`, m.Version)
	}
	if err != nil {
		return fmt.Errorf("migration %04d_%s %s: schema_version: %w", m.Version, m.Name, what, err)
	}
	return nil
}

// statements splits a migration into its statements at semicolons that
// end a line. Migrations are plain DDL written for this: no semicolon ends
// a line inside a string or a body, and "--" starts a comment only at the
// start of a line.
func statements(script string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(script) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return slices.Clip(out)
}
