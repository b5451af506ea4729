package sqldb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

var ctx = context.Background()

func connect(t *testing.T, url string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// schemaQueries describe every object of the schema in a form that two
// databases with the same schema print alike.
var schemaQueries = map[sqldb.Dialect][]string{
	sqldb.SQLite: {
		`SELECT type || ' ' || name || ' ' || tbl_name || ': ' || COALESCE(sql, '') FROM sqlite_schema
			WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`,
	},
	sqldb.Postgres: {
		`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' ||
			COALESCE(column_default, '') || ' ' || COALESCE(collation_name, '')
			FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
		`SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`,
		`SELECT conrelid::regclass::text || ' ' || conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint
			WHERE connamespace = current_schema()::regnamespace ORDER BY 1`,
		`SELECT sequence_name || ' ' || data_type || ' ' || start_value || ' ' || increment
			FROM information_schema.sequences WHERE sequence_schema = current_schema() ORDER BY sequence_name`,
	},
}

func schema(t *testing.T, db *sqldb.DB) []string {
	t.Helper()
	var out []string
	for _, q := range schemaQueries[db.Dialect] {
		rows, err := db.Read().QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func version(t *testing.T, db *sqldb.DB) int {
	t.Helper()
	v, err := db.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrationsUpDownUp applies every up, every down, and every up again,
// one version at a time, and checks that each version's schema is the
// same on the way up both times and on the way down, and that the downs
// leave nothing but schema_version behind.
func TestMigrationsUpDownUp(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		db := connect(t, newURL(t))
		ms, err := sqldb.Migrations(db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) < 2 {
			t.Fatalf("%d migrations", len(ms))
		}
		if v := version(t, db); v != 0 {
			t.Fatalf("new database at version %d", v)
		}
		empty := schema(t, db)
		if len(empty) == 0 || !strings.Contains(strings.Join(empty, "\n"), "schema_version") {
			t.Fatalf("empty schema %q: want schema_version alone", empty)
		}
		up := [][]string{empty}
		for v := 1; v <= len(ms); v++ {
			if err := db.Migrate(ctx, v); err != nil {
				t.Fatalf("up to %d: %v", v, err)
			}
			if got := version(t, db); got != v {
				t.Fatalf("after up to %d: version %d", v, got)
			}
			up = append(up, schema(t, db))
			if slices.Equal(up[v], up[v-1]) {
				t.Fatalf("migration %d changed nothing", v)
			}
		}
		for v := len(ms) - 1; v >= 0; v-- {
			if err := db.Migrate(ctx, v); err != nil {
				t.Fatalf("down to %d: %v", v, err)
			}
			requireSame(t, fmt.Sprintf("down to %d", v), up[v], schema(t, db))
		}
		if err := db.Migrate(ctx, sqldb.Latest); err != nil {
			t.Fatalf("up again: %v", err)
		}
		if got := version(t, db); got != len(ms) {
			t.Fatalf("after up again: version %d", got)
		}
		requireSame(t, "up again", up[len(ms)], schema(t, db))
		// Latest again changes nothing.
		if err := db.Migrate(ctx, sqldb.Latest); err != nil {
			t.Fatal(err)
		}
		requireSame(t, "latest twice", up[len(ms)], schema(t, db))
	})
}

func requireSame(t *testing.T, what string, want, got []string) {
	t.Helper()
	if !slices.Equal(want, got) {
		t.Fatalf("%s: schema differs\nwant:\n%s\ngot:\n%s", what, strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}

// TestMigrateConcurrently: processes opening a new database at once
// (several hosts starting) apply each migration once.
func TestMigrateConcurrently(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				db, err := sqldb.Open(ctx, url)
				if err == nil {
					db.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("open %d: %v", i, err)
			}
		}
		db := connect(t, url)
		ms, _ := sqldb.Migrations(db.Dialect)
		if got := version(t, db); got != len(ms) {
			t.Fatalf("version %d, want %d", got, len(ms))
		}
	})
}

// TestNewerSchemaRefused: a database migrated by a newer binary is not
// touched.
func TestNewerSchemaRefused(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		db := connect(t, url)
		if err := db.Migrate(ctx, sqldb.Latest); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Write().ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (999, 'future', 'x')`); err != nil {
			t.Fatal(err)
		}
		before := schema(t, db)
		_, err := sqldb.Open(ctx, url)
		if err == nil || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("Open of a newer schema: %v; want it refused", err)
		}
		if err := db.Migrate(ctx, 0); err == nil {
			t.Fatal("Migrate down from a newer schema succeeded")
		}
		requireSame(t, "refused", before, schema(t, db))
	})
}

func TestBadURLs(t *testing.T) {
	for _, u := range []string{"", "mysql://x", "sqlite:", "sqlite:/tmp/a?b", "postgres://u:secret@[::1/db"} {
		db, err := sqldb.Connect(ctx, u)
		if err == nil {
			db.Close()
			t.Errorf("Connect(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Connect(%q): the error shows the password: %v", u, err)
		}
	}
}

// TestSupervisedBackfilled: the migration that adds the runs' supervised
// column sets it from the records already there, also from one whose task
// holds the \u0000 escape, which PostgreSQL's json refuses.
func TestSupervisedBackfilled(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		db := connect(t, newURL(t))
		if err := db.Migrate(ctx, 6); err != nil {
			t.Fatal(err)
		}
		docs := map[string]string{
			"taken":   `{"id":"taken","state":"queued","supervisor":{"pid":7,"host":"h"}}`,
			"waiting": `{"id":"waiting","state":"queued"}`,
			"nulled":  `{"id":"nulled","state":"queued","supervisor":null}`,
			"escaped": `{"id":"escaped","state":"running","task":"a\u0000b\\u0000c","supervisor":{"pid":8,"host":"h"}}`,
		}
		seq := 0
		for id, doc := range docs {
			seq++
			if _, err := db.Write().ExecContext(ctx, `INSERT INTO runs (id, seq, state, repo, version, doc) VALUES ($1, $2, 'queued', '/r', 1, $3)`,
				id, seq, doc); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Migrate(ctx, 7); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Read().QueryContext(ctx, `SELECT id FROM runs WHERE supervised ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		rows.Close()
		if want := []string{"escaped", "taken"}; !slices.Equal(got, want) {
			t.Fatalf("supervised after the migration: %v, want %v", got, want)
		}
	})
}
