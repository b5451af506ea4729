package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// BenchmarkSubmitWait measures `agentrun submit --wait` of a command agent
// that writes one file: the time from submit to the agent process
// starting, and the total overhead excluding the agent's own run time.
func BenchmarkSubmitWait(b *testing.B) {
	for _, c := range []struct {
		name    string
		files   int
		sandbox string
	}{
		{"host/1file", 1, "host"},
		{"host/10kfiles", 10000, "host"},
		{"native/1file", 1, "native"},
		{"native/10kfiles", 10000, "native"},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := benchEnv(b, c.files)
			marks := filepath.Join(e.root, "marks")
			if err := os.MkdirAll(marks, 0o755); err != nil {
				b.Fatal(err)
			}
			var toStart, overhead time.Duration
			var starts, overheads []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				// The agent stamps its start and end into the workspace
				// (visible in every backend); we read them from the host.
				agent := `date +%s%N > .start; echo x > f.txt; date +%s%N > .end`
				t0 := time.Now()
				cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", c.sandbox, "--agent-cmd", agent, "--wait", "bench")
				cmd.Dir, cmd.Env = e.repo, e.vars
				out, err := cmd.CombinedOutput()
				total := time.Since(t0)
				if err != nil {
					if strings.Contains(string(out), "sandbox_preflight") {
						b.Skipf("native sandbox unavailable: %s", out)
					}
					b.Fatalf("submit: %v\n%s", err, out)
				}
				id := between(string(out), `"id": "`, `"`)
				ws := filepath.Join(e.home, "runs", id, "workspace")
				start, end := readNanos(b, filepath.Join(ws, ".start")), readNanos(b, filepath.Join(ws, ".end"))
				toStart += start.Sub(t0)
				overhead += total - end.Sub(start)
				starts, overheads = append(starts, start.Sub(t0)), append(overheads, total-end.Sub(start))
			}
			n := float64(b.N)
			b.ReportMetric(float64(toStart.Microseconds())/1000/n, "ms-to-agent-start")
			b.ReportMetric(float64(overhead.Microseconds())/1000/n, "ms-overhead")
			// Medians: the machine is shared, and one slow run should not
			// move the figure.
			b.ReportMetric(median(starts), "ms-to-agent-start(median)")
			b.ReportMetric(median(overheads), "ms-overhead(median)")
		})
	}
}

// median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

func readNanos(b *testing.B, path string) time.Time {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("agent stamp: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, ns)
}

func between(s, a, z string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	if j := strings.Index(s, z); j >= 0 {
		return s[:j]
	}
	return s
}

// benchEnv is newEnv for benchmarks, with a repository of n files.
func benchEnv(b *testing.B, n int) *env {
	root := b.TempDir()
	e := &env{t: b, bin: testsupport.Agentrun(b), root: root, home: filepath.Join(root, "data")}
	// As newEnv's: the last run's supervisor may still be finishing (a
	// spare workspace, its last events) when the benchmark ends; the temp
	// dir goes once every one has let go.
	b.Cleanup(e.stopAll)
	e.vars = []string{"AGENTRUN_HOME=" + e.home, "XDG_CONFIG_HOME=" + filepath.Join(root, "config"),
		"HOME=" + root, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"GIT_AUTHOR_NAME=B", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=B", "GIT_COMMITTER_EMAIL=b@example.com"}
	e.repo = filepath.Join(root, "repo")
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("d%02d/f%05d.txt", i%100, i)] = fmt.Sprintf("file %d\n", i)
	}
	testsupport.RepoAt(b, e.repo, files)
	return e
}
