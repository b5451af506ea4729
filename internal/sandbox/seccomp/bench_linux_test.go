package seccomp

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// benchChildEnv makes the test binary a child that times opens (see
// TestBenchChild); its value is "filter" or "none".
const benchChildEnv = "AGENTRUN_SECCOMP_BENCH_CHILD"

// TestBenchChild is the child of BenchmarkOpenat: with the filter loaded
// (or not) it opens and closes /dev/null N times and prints the time of
// one open and close, in ns. A filter stays with its process, hence the
// child. Outside a benchmark it does nothing.
func TestBenchChild(t *testing.T) {
	mode := os.Getenv(benchChildEnv)
	if mode == "" {
		return
	}
	runtime.LockOSThread()
	if mode == "filter" {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := LoadAllThreads(); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := strconv.Atoi(os.Getenv(benchChildEnv + "_N"))
	t0 := time.Now()
	for range n {
		fd, err := unix.Openat(unix.AT_FDCWD, "/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	fmt.Printf("ns-per-open %d\n", time.Since(t0).Nanoseconds()/int64(max(n, 1)))
}

// BenchmarkOpenat: an open and close of /dev/null without the filter and
// under it. openat is a call whose arguments the filter reads, so the
// kernel runs the filter on each one (it skips the filter for calls it
// allows whatever their arguments): the difference is what the filter
// costs each open in a sandbox.
func BenchmarkOpenat(b *testing.B) {
	for _, mode := range []string{"none", "filter"} {
		b.Run(mode, func(b *testing.B) {
			out := testsupport.RunHelpers(b, "TestBenchChild", 1, []string{benchChildEnv + "=" + mode, fmt.Sprintf("%s_N=%d", benchChildEnv, b.N)}, nil)
			for line := range strings.SplitSeq(out, "\n") {
				if v, ok := strings.CutPrefix(line, "ns-per-open "); ok {
					ns, _ := strconv.ParseFloat(v, 64)
					b.ReportMetric(ns, "ns/open")
					return
				}
			}
			b.Fatalf("no time from the child:\n%s", out)
		})
	}
}
