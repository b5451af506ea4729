package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// reportP50 runs op b.N times and reports the median latency.
func reportP50(b *testing.B, op func() error) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkRoundTripReadFile(b *testing.B) {
	root := b.TempDir()
	os.WriteFile(filepath.Join(root, "small.txt"), []byte("hello, small file\n"), 0o644)
	c := testClient(b, testServer(b, root, ServerOptions{}))
	ctx := context.Background()
	reportP50(b, func() error {
		_, err := c.ReadFile(ctx, ReadFileRequest{Path: "small.txt"})
		return err
	})
}

func BenchmarkRoundTripExecTrue(b *testing.B) {
	c := testClient(b, testServer(b, b.TempDir(), ServerOptions{}))
	ctx := context.Background()
	reportP50(b, func() error {
		_, err := c.Exec(ctx, ExecRequest{Argv: []string{"true"}}, nil, nil)
		return err
	})
}

func BenchmarkRoundTripWriteFile256K(b *testing.B) {
	c := testClient(b, testServer(b, b.TempDir(), ServerOptions{}))
	ctx := context.Background()
	data := bytes.Repeat([]byte("A"), 256<<10)
	b.SetBytes(int64(len(data)))
	reportP50(b, func() error {
		_, err := c.WriteFile(ctx, WriteFileRequest{Path: "w.bin", Data: data})
		return err
	})
}
