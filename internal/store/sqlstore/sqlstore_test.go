package sqlstore_test

import (
	"context"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

var ctx = context.Background()

func openStore(tb testing.TB, url string) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		storetest.Run(t, func(t *testing.T) run.Store { return openStore(t, newURL(t)) })
	})
}

// BenchmarkConformance runs the suite's benchmarks on each database. An
// Update is one transaction (read the row locked, decode, encode, write)
// and an AppendEvent one transaction of two statements, each commit
// synced to disk.
func BenchmarkConformance(b *testing.B) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		storetest.Bench(b, func(b *testing.B) run.Store { return openStore(b, newURL(b)) })
	})
}
