package sandboxtest

import (
	"bytes"
	"context"
	"testing"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// benchFileSize is the size of the file the file-op benchmarks write and
// read.
const benchFileSize = 64 << 10

// Bench measures backend be's hot operations on the suite's fixture:
// Start+Destroy of a sandbox, Exec of `true` in a running one, WriteFile
// and ReadFile of 64 KiB. opts.Spec adjusts the spec as for Run; the rest
// of opts is Run's alone. Every backend's tests call it in a few lines.
func Bench(b *testing.B, be sandbox.Backend, opts Options) {
	ctx := context.Background()
	if err := be.Preflight(ctx); err != nil {
		b.Fatalf("preflight %s: %v", be.Name(), err)
	}
	b.Run("StartDestroy", func(b *testing.B) {
		spec, _ := fixtureSpec(b, opts.Spec)
		for b.Loop() {
			sb, err := be.Start(ctx, spec)
			if err != nil {
				b.Fatalf("start %s: %v", be.Name(), err)
			}
			if err := sb.Destroy(ctx); err != nil {
				b.Fatalf("destroy: %v", err)
			}
		}
	})
	b.Run("ExecTrue", func(b *testing.B) {
		e := startEnv(b, be, opts.Spec)
		for b.Loop() {
			res, err := e.cl.Exec(ctx, runner.ExecRequest{Argv: []string{"true"}}, nil, nil)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec true: %v %+v", err, res)
			}
		}
	})
	data := bytes.Repeat([]byte("sandboxtest0123\n"), benchFileSize/16)
	b.Run("WriteFile64KiB", func(b *testing.B) {
		e := startEnv(b, be, opts.Spec)
		b.SetBytes(benchFileSize)
		for b.Loop() {
			if _, err := e.cl.WriteFile(ctx, runner.WriteFileRequest{Path: "bench.bin", Data: data}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadFile64KiB", func(b *testing.B) {
		e := startEnv(b, be, opts.Spec)
		if _, err := e.cl.WriteFile(ctx, runner.WriteFileRequest{Path: "bench.bin", Data: data}); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchFileSize)
		for b.Loop() {
			r, err := e.cl.ReadFile(ctx, runner.ReadFileRequest{Path: "bench.bin"})
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Data) != benchFileSize {
				b.Fatalf("read %d bytes, want %d", len(r.Data), benchFileSize)
			}
		}
	})
}
