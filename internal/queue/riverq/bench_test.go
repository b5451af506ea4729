package riverq_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/queue/riverq"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// BenchmarkHandoff measures the queue's part of a dispatch: from the
// insert of a run's job to a waiting taker being handed the run (River's
// fetch, the check, the matcher), one run at a time. It reports the p50
// and p99.
func BenchmarkHandoff(b *testing.B) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		ctx := context.Background()
		url := newURL(b)
		db, err := sqldb.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		q, err := riverq.Open(ctx, db, url, riverq.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		rs := &runs{waiting: map[string]int64{}, checks: map[string]int{}}
		if err := q.Start(ctx, rs.check); err != nil {
			b.Fatal(err)
		}
		var ds []time.Duration
		i := 0
		for b.Loop() {
			i++
			id := fmt.Sprint("r", i)
			rs.mu.Lock()
			rs.waiting[id] = int64(i)
			rs.mu.Unlock()
			got := make(chan time.Time, 1)
			go func() {
				o, done, err := q.Next(ctx, func(queue.Offer) bool { return true })
				if err == nil {
					rs.take(o.Run)
					done(true)
				}
				got <- time.Now()
			}()
			time.Sleep(5 * time.Millisecond) // the taker waits first, as a host's long poll does
			t0 := time.Now()
			if err := q.Enqueue(ctx, queue.Queued{ID: id, At: t0}); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, (<-got).Sub(t0))
		}
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
	})
}
