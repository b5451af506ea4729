package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLayerCopyFill: Fill of a copy workspace on a cached commit of
// the small fixture, from the layer's spare (made between rounds, as
// between runs) and without spares (a copy of the layer's files).
func BenchmarkLayerCopyFill(b *testing.B) {
	for _, spares := range []bool{false, true} {
		b.Run(fmt.Sprintf("spares=%v", spares), func(b *testing.B) {
			repo, base := newRepo(b)
			c := NewLayerCache(b.TempDir())
			c.noSpares.Store(!spares)
			p := NewLayerCopy(c).(Filler)
			root := b.TempDir()
			if _, err := p.Fill(context.Background(), repo, base, mkdir(b, filepath.Join(root, "first")), filepath.Join(root, "state-first")); err != nil {
				b.Fatal(err)
			}
			c.WaitSpares()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				dir := mkdir(b, filepath.Join(root, fmt.Sprint("ws", i)))
				b.StartTimer()
				if _, err := p.Fill(context.Background(), repo, base, dir, filepath.Join(root, fmt.Sprint("state", i))); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				c.WaitSpares()
				b.StartTimer()
			}
		})
	}
}

func mkdir(b *testing.B, dir string) string {
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}
