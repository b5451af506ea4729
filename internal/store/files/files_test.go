package files_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

func openStore(t testing.TB) *files.Store {
	t.Helper()
	s, err := files.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) run.Store { return openStore(t) })
}

// BenchmarkConformance runs the suite's benchmarks. Here Update is one
// locked read-modify-write of a full record (flock, read, decode, encode,
// temp file, fsync, rename, fsync dir) and AppendEvent one journal append
// (flock, write, fsync).
func BenchmarkConformance(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) run.Store { return openStore(b) })
}
