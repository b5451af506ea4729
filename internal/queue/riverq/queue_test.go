package riverq_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/queue/riverq"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// runs is a stand-in for the server's runs: which wait, and their seq.
type runs struct {
	mu      sync.Mutex
	waiting map[string]int64
	checks  map[string]int
}

func (r *runs) check(_ context.Context, id string) (queue.Offer, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[id]++
	seq, ok := r.waiting[id]
	return queue.Offer{Run: id, Seq: seq, Backend: "host"}, ok, nil
}

func (r *runs) take(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiting, id)
}

func open(t *testing.T, url string, o riverq.Options) (*sqldb.DB, *riverq.Queue) {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	q, err := riverq.Open(ctx, db, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return db, q
}

func next(t *testing.T, q *riverq.Queue, fits func(queue.Offer) bool) queue.Offer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, done, err := q.Next(ctx, fits)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	done(true)
	return o
}

func any(queue.Offer) bool { return true }

// TestQueue hands queued runs to takers oldest first, skips a queueing
// inserted twice, offers again a run whose taker did not take it, and
// leaves alone a run that no longer waits.
func TestQueue(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		_, q := open(t, newURL(t), riverq.Options{Hold: 2 * time.Second})
		rs := &runs{waiting: map[string]int64{"r3": 3, "r1": 1, "r2": 2}, checks: map[string]int{}}
		at := time.Now()
		// Inserted before the start (the sweep of a server's start), r1
		// twice: one job.
		if err := q.Enqueue(ctx, queue.Queued{ID: "r3", At: at}, queue.Queued{ID: "r1", At: at}, queue.Queued{ID: "r2", At: at}); err != nil {
			t.Fatal(err)
		}
		if err := q.Enqueue(ctx, queue.Queued{ID: "r1", At: at}); err != nil {
			t.Fatal(err)
		}
		if err := q.Start(ctx, rs.check); err != nil {
			t.Fatal(err)
		}
		// Wait for all three to be held, then take them: by seq.
		deadline := time.Now().Add(10 * time.Second)
		for len(q.Waiting()) < 3 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		for _, want := range []string{"r1", "r2", "r3"} {
			o := next(t, q, any)
			rs.take(o.Run)
			if o.Run != want {
				t.Fatalf("took %s, want %s", o.Run, want)
			}
		}
		// A taker that fits none waits; one that refuses sees the run
		// again.
		rs.mu.Lock()
		rs.waiting["r4"] = 4
		rs.mu.Unlock()
		if err := q.Enqueue(ctx, queue.Queued{ID: "r4", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _, err := q.Next(short, func(o queue.Offer) bool { return o.Backend == "docker" })
		cancel()
		if err == nil {
			t.Fatal("a taker that fits no run was given one")
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		o, done, err := q.Next(wctx, any)
		if err != nil || o.Run != "r4" {
			t.Fatalf("next: %v %v", o, err)
		}
		done(false)
		if o = next(t, q, any); o.Run != "r4" {
			t.Fatalf("after a refusal got %s", o.Run)
		}
		rs.take("r4")
		// A queueing of a run that no longer waits completes unoffered.
		if err := q.Enqueue(ctx, queue.Queued{ID: "r1", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for range 200 {
			rs.mu.Lock()
			n := rs.checks["r1"]
			rs.mu.Unlock()
			if n >= 2 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if w := q.Waiting(); len(w) != 0 {
			t.Fatalf("held %v", w)
		}
		if rs.checks["r1"] != 2 {
			t.Fatalf("r1 checked %d times, want 2 (two queueings)", rs.checks["r1"])
		}
	})
}

// TestMigrateDown takes River's tables away and back.
func TestMigrateDown(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		url := newURL(t)
		db, q := open(t, url, riverq.Options{})
		if !hasTable(t, db, "river_job") {
			t.Fatal("no river_job after Open")
		}
		if err := q.MigrateDown(ctx); err != nil {
			t.Fatal(err)
		}
		if hasTable(t, db, "river_job") {
			t.Fatal("river_job left after the way down")
		}
		if _, q2 := open(t, url, riverq.Options{}); q2 == nil || !hasTable(t, db, "river_job") {
			t.Fatal("no river_job after a second Open")
		}
	})
}

func hasTable(t *testing.T, db *sqldb.DB, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
	if db.Dialect == sqldb.Postgres {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	}
	var n int
	if err := db.Read().QueryRowContext(context.Background(), q, name).Scan(&n); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return n > 0
}

// TestSweepTakesOverHeldJobs: a server that starts while a job of a
// queued run is still running (held by a server that died, as far as it
// can tell) hands the run out without waiting for River's rescue.
func TestSweepTakesOverHeldJobs(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		url := newURL(t)
		db, q := open(t, url, riverq.Options{})
		rs := &runs{waiting: map[string]int64{"r1": 1}, checks: map[string]int{}}
		at := time.Now()
		if err := q.Enqueue(ctx, queue.Queued{ID: "r1", At: at}); err != nil {
			t.Fatal(err)
		}
		// The job as a server killed while it held it leaves it.
		if _, err := db.Write().ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1 WHERE kind = 'dispatch'`); err != nil {
			t.Fatal(err)
		}
		if err := q.Sweep(ctx, []queue.Queued{{ID: "r1", At: at}}); err != nil {
			t.Fatal(err)
		}
		if err := q.Start(ctx, rs.check); err != nil {
			t.Fatal(err)
		}
		if o := next(t, q, any); o.Run != "r1" {
			t.Fatalf("got %s", o.Run)
		}
		rs.take("r1")
	})
}
