package sqlcoord_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/coord/coordtest"
	"github.com/agentrun/agentrun/internal/coord/sqlcoord"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

var ctx = context.Background()

// conformanceTTL is short enough that every lease in the suite is renewed
// several times, and long enough for a loaded machine's scheduling.
const conformanceTTL = 3 * time.Second

func openCoord(tb testing.TB, url string, ttl time.Duration) *sqlcoord.Coordinator {
	tb.Helper()
	c, err := sqlcoord.Open(ctx, url, sqlcoord.Options{LeaseTTL: ttl})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestConformance(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		coordtest.Run(t, func(t *testing.T) coord.Coordinator { return openCoord(t, newURL(t), conformanceTTL) })
	})
}

func BenchmarkCoordinator(b *testing.B) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		coordtest.Bench(b, func(b *testing.B) coord.Coordinator { return openCoord(b, newURL(b), 0) })
	})
}
