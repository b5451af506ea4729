package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSubmitWaitDirtyDisk is a native one-file run (as
// BenchmarkSubmitWait's) on a disk that holds other programs' unwritten
// data, as a build running beside it leaves: 256 MiB written to a file on
// the data directory's file system just before the run. Every other run
// is the reference: the same run on a disk with nothing left to write.
// A run must not wait for the disk to write what is not its own: a
// native sandbox's overlays sync the whole file system under their upper
// layers when they are unmounted, which its supervisor now does after
// the run has ended (a run submitted at once after it shares the disk
// with that sync). Before each run the previous one's supervisor has
// exited and the disk is synced; that, and the writing, are not timed.
func BenchmarkSubmitWaitDirtyDisk(b *testing.B) {
	e := benchEnv(b, 1)
	dirty := filepath.Join(e.root, "dirty")
	buf := make([]byte, 1<<20)
	// run submits one run once the last one's supervisor has exited and
	// the disk is synced, after writing mib MiB that it leaves unwritten,
	// and says how long the submit took.
	run := func(mib int) time.Duration {
		b.StopTimer()
		defer b.StartTimer()
		syncFS(b, e.root)
		if mib > 0 {
			writeDirty(b, dirty, buf, mib)
			defer os.Remove(dirty)
		}
		b.StartTimer()
		t0 := time.Now()
		cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", "native", "--agent-cmd", "echo x > f.txt", "--wait", "bench")
		cmd.Dir, cmd.Env = e.repo, e.vars
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		b.StopTimer()
		if err != nil {
			if strings.Contains(string(out), "sandbox_preflight") {
				b.Skipf("native sandbox unavailable: %s", out)
			}
			b.Fatalf("submit: %v\n%s", err, out)
		}
		e.released(between(string(out), `"id": "`, `"`))
		return d
	}
	run(0) // the first run of a data directory makes it: not counted
	var clean, busy []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 1 {
			busy = append(busy, run(256))
		} else {
			clean = append(clean, run(0))
		}
	}
	if len(busy) == 0 {
		return // (one round: nothing to compare)
	}
	b.ReportMetric(median(clean), "ms-run-clean-disk(median)")
	b.ReportMetric(median(busy), "ms-run-dirty-disk(median)")
	b.ReportMetric(median(busy)/median(clean), "ratio")
}

// syncFS writes out everything of the file system that holds dir.
func syncFS(b *testing.B, dir string) {
	f, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
}

// writeDirty writes mib MiB of buf's bytes to path, without syncing.
func writeDirty(b *testing.B, path string, buf []byte, mib int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for range mib {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}
