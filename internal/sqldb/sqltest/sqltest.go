// Package sqltest gives tests fresh, empty databases of each dialect that
// internal/sqldb supports: a SQLite file in a temporary directory, and a
// schema of its own on the PostgreSQL server named by
// AGENTRUN_TEST_POSTGRES (started by .ci/install-postgres.sh). Without
// that variable the PostgreSQL tests skip, or fail where
// AGENTRUN_REQUIRE_CAPS=1 (CI) requires them.
//
// It is for tests only.
package sqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// PostgresEnv names the URL of the PostgreSQL server tests may use: a
// role that may create schemas in the database.
const PostgresEnv = "AGENTRUN_TEST_POSTGRES"

// Target is one dialect to test on.
type Target struct {
	Name string
	// URL returns the URL of a fresh, empty database, removed when tb
	// ends.
	URL func(tb testing.TB) string
}

// Targets are SQLite and PostgreSQL.
var Targets = []Target{{"SQLite", SQLite}, {"PostgreSQL", Postgres}}

// Each runs fn as a subtest per target.
func Each(t *testing.T, fn func(t *testing.T, newURL func(tb testing.TB) string)) {
	for _, tg := range Targets {
		t.Run(tg.Name, func(t *testing.T) { fn(t, tg.URL) })
	}
}

// EachBench is Each for benchmarks.
func EachBench(b *testing.B, fn func(b *testing.B, newURL func(tb testing.TB) string)) {
	for _, tg := range Targets {
		b.Run(tg.Name, func(b *testing.B) { fn(b, tg.URL) })
	}
}

// SQLite is the URL of a new SQLite file in a temporary directory.
func SQLite(tb testing.TB) string {
	tb.Helper()
	return "sqlite:" + filepath.Join(tb.TempDir(), "agentrun.db")
}

// Postgres creates a schema of its own on the test server and returns a
// URL whose connections use it (search_path); the schema is dropped when
// tb ends.
func Postgres(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv(PostgresEnv)
	testsupport.Require(tb, "a PostgreSQL server", base != "", "%s is not set (export %s=$(.ci/install-postgres.sh))", PostgresEnv, PostgresEnv)
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", PostgresEnv, err)
	}
	var b [8]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin := open(tb, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		tb.Fatalf("create schema on the test server: %v", err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// open connects to the test server; it fails (never skips) when the
// variable is set but the server cannot be reached.
func open(tb testing.TB, raw string) *sql.DB {
	tb.Helper()
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		tb.Fatalf("%s: %v", PostgresEnv, err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		tb.Fatalf("the PostgreSQL test server (%s) cannot be reached: %v", PostgresEnv, err)
	}
	return db
}
