package files_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

// BenchmarkList1000 lists a store of 1,000 runs with full records (every
// field set, one attempt with a check), as `agentrun list` does.
func BenchmarkList1000(b *testing.B) {
	s := openStore(b)
	for i := 0; i < 1000; i++ {
		r := storetest.FullRun(run.NewID())
		if err := s.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		runs, broken, err := s.List(ctx, run.Filter{})
		if err != nil || len(runs) != 1000 || len(broken) != 0 {
			b.Fatalf("List: %d runs, %v, %v", len(runs), broken, err)
		}
	}
}
