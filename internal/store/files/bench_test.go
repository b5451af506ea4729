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

// BenchmarkUpdate is one locked read-modify-write of a full record
// (flock, read, decode, encode, temp file, fsync, rename, fsync dir).
func BenchmarkUpdate(b *testing.B) {
	s := openStore(b)
	r := storetest.FullRun(run.NewID())
	if err := s.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Update(ctx, r.ID, func(c *run.Run) error { c.MaxAttempts++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEvent is one journal append (flock, write, fsync).
func BenchmarkAppendEvent(b *testing.B) {
	s := openStore(b)
	r := storetest.FullRun(run.NewID())
	if err := s.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	e := run.NewEvent(run.EventEgress, "allowed", map[string]any{"decision": "allow", "host": "proxy.golang.org", "port": 443})
	for b.Loop() {
		if _, err := s.AppendEvent(ctx, r.ID, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet reads and decodes one full record.
func BenchmarkGet(b *testing.B) {
	s := openStore(b)
	r := storetest.FullRun(run.NewID())
	if err := s.Create(ctx, r); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
	}
}
