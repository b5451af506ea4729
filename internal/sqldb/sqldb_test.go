package sqldb_test

import (
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// TestSharedSQLiteWriter: DBs of one process on the same file share its
// write connection, and closing one leaves the others working.
func TestSharedSQLiteWriter(t *testing.T) {
	url := sqltest.SQLite(t)
	a, err := sqldb.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sqldb.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if a.Write() != b.Write() {
		t.Fatal("two DBs on one file have write pools of their own")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.Write().ExecContext(ctx, `UPDATE run_counter SET seq = seq + 1`); err != nil {
		t.Fatalf("write after the other DB closed: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := sqldb.Open(ctx, url)
	if err != nil {
		t.Fatalf("open after all closed: %v", err)
	}
	defer c.Close()
	var n int
	if err := c.Read().QueryRowContext(ctx, `SELECT seq FROM run_counter`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("counter %d, %v", n, err)
	}
}

// TestInTxRetriesDeadlock: two transactions that lock two rows in
// opposite orders deadlock on PostgreSQL; the server aborts one, and InTx
// runs it again, so both commit.
func TestInTxRetriesDeadlock(t *testing.T) {
	db, err := sqldb.Open(ctx, sqltest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write().ExecContext(ctx, `CREATE TABLE pair (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write().ExecContext(ctx, `INSERT INTO pair VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	var both sync.WaitGroup // each has locked its first row
	both.Add(2)
	var attempts atomic.Int32
	var first [2]atomic.Bool
	bump := func(tx *sql.Tx, k int) error {
		_, err := tx.ExecContext(ctx, `UPDATE pair SET v = v + 1 WHERE k = $1`, k)
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, order := range [][2]int{{1, 2}, {2, 1}} {
		wg.Go(func() {
			errs[i] = db.InTx(ctx, func(tx *sql.Tx) error {
				attempts.Add(1)
				if err := bump(tx, order[0]); err != nil {
					return err
				}
				if first[i].CompareAndSwap(false, true) {
					both.Done()
					both.Wait()
				}
				return bump(tx, order[1])
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
	if n := attempts.Load(); n < 3 {
		t.Fatalf("%d attempts: want a deadlock and a retry", n)
	}
	var v1, v2 int
	if err := db.Read().QueryRowContext(ctx, `SELECT (SELECT v FROM pair WHERE k = 1), (SELECT v FROM pair WHERE k = 2)`).Scan(&v1, &v2); err != nil {
		t.Fatal(err)
	}
	if v1 != 2 || v2 != 2 {
		t.Fatalf("rows %d and %d, want 2 and 2 (each transaction once)", v1, v2)
	}
}
