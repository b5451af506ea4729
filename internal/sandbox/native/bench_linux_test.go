package native_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/native"
)

// reportP50 reports the median of the measured durations in ms.
func reportP50(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
}

// childCPU is the CPU time (user and system) of this process's reaped
// children so far.
func childCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportChildCPU reports the CPU time the children reaped since since
// used per iteration: the sandbox's own processes (the init counts its
// reaped runner and commands), which the load of the machine changes
// less than the wall time.
func reportChildCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64((childCPU()-since).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkStartToFirstExec: Start (namespaces, root, confinement, runner)
// until the first Exec of `true` has returned. Destroy is not timed.
func BenchmarkStartToFirstExec(b *testing.B) {
	nb := requireNative(b)
	ctx := context.Background()
	var ds []time.Duration
	cpu := childCPU()
	for b.Loop() {
		sb, d := firstExec(b, nb, newSpec(b))
		ds = append(ds, d)
		b.StopTimer()
		sb.Destroy(ctx)
		b.StartTimer()
	}
	reportP50(b, ds)
	reportChildCPU(b, cpu)
}

// firstExec starts a sandbox of spec and runs `true` in it: it returns
// the sandbox and the time from Start's call until the Exec returned.
func firstExec(b *testing.B, nb *native.Backend, spec sandbox.Spec) (sandbox.Sandbox, time.Duration) {
	ctx := context.Background()
	t0 := time.Now()
	sb, err := nb.Start(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Argv: []string{"true"}}, nil, nil)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("exec true: %v %v", err, res)
	}
	return sb, time.Since(t0)
}

// BenchmarkStartAheadToFirstExec is BenchmarkStartToFirstExec for a
// sandbox whose init was started ahead (Prewarm), as a supervisor starts
// it while it makes the run's workspace: Start (the root, confinement,
// the runner) until the first Exec of `true` has returned. The init's own
// start, given 200 ms, and Destroy are not timed.
func BenchmarkStartAheadToFirstExec(b *testing.B) {
	nb := requireNative(b)
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		b.StopTimer()
		spec := newSpec(b)
		nb.Prewarm(ctx)
		time.Sleep(200 * time.Millisecond)
		b.StartTimer()
		sb, d := firstExec(b, nb, spec)
		ds = append(ds, d)
		b.StopTimer()
		if !tookWarm(sb) {
			b.Fatal("Start did not take the init started ahead")
		}
		sb.Destroy(ctx)
		b.StartTimer()
	}
	reportP50(b, ds)
}

// BenchmarkStartSteps is BenchmarkStartToFirstExec broken down: each
// metric is the median time from Start's call until a step of the start
// ended (the host's steps and the init's, on one clock; "runner-answered"
// is the runner's hello, "first-exec" the first Exec's return), so the
// gap between two steps is where the time goes. Destroy is not timed.
func BenchmarkStartSteps(b *testing.B) {
	nb := requireNative(b)
	ctx := context.Background()
	at := map[string][]time.Duration{}
	// The usual order, for the metrics' names (the host's cgroups and the
	// init's first steps run at the same time).
	order := []string{"host-start", "host-spawn", "host-spawned", "init-runtime", "init-exec-privileges", "init-main", "host-cgroups", "init-config", "init-signals", "init-root",
		"init-net", "init-go", "init-landlock", "init-confined", "init-program-started", "init-serving", "host-ready", "host-runner-answered", "first-exec"}
	for b.Loop() {
		sb, _ := firstExec(b, nb, newSpec(b))
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		marks := append(native.StartMarks(sb), native.Mark{Step: "first-exec", At: ts.Nano()})
		slices.SortStableFunc(marks, func(x, y native.Mark) int { return int(x.At - y.At) })
		for _, m := range marks {
			if !slices.Contains(order, m.Step) {
				order = append(order, m.Step)
			}
			at[m.Step] = append(at[m.Step], time.Duration(m.At-marks[0].At))
		}
		b.StopTimer()
		sb.Destroy(ctx)
		b.StartTimer()
	}
	for i, step := range order {
		if d := at[step]; len(d) > 0 {
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, fmt.Sprintf("%02d-%s-ms", i, step))
		}
	}
}

// BenchmarkCommandTrue: a one-shot sandbox running `true` (no runner), the
// same work as the bwrap reference.
func BenchmarkCommandTrue(b *testing.B) {
	nb := requireNative(b)
	ctx := context.Background()
	spec := newSpec(b)
	var ds []time.Duration
	cpu := childCPU()
	for b.Loop() {
		t0 := time.Now()
		code, _, err := nb.Command(ctx, spec, []string{"true"}, nil, nil, nil)
		if err != nil || code != 0 {
			b.Fatalf("true: %d %v", code, err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportP50(b, ds)
	reportChildCPU(b, cpu)
}

// BenchmarkRoundTripExecTrue: Exec of `true` in a running sandbox.
func BenchmarkRoundTripExecTrue(b *testing.B) {
	nb := requireNative(b)
	ctx := context.Background()
	sb, err := nb.Start(ctx, newSpec(b))
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Argv: []string{"true"}}, nil, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %v %v", err, res)
		}
		ds = append(ds, time.Since(t0))
	}
	reportP50(b, ds)
}

// BenchmarkBwrapReference times bubblewrap running `true` with every
// namespace, for comparison only (skipped without bwrap).
func BenchmarkBwrapReference(b *testing.B) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap is not installed")
	}
	var ds []time.Duration
	cpu := childCPU()
	for b.Loop() {
		t0 := time.Now()
		out, err := exec.Command(path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "true").CombinedOutput()
		if err != nil {
			b.Fatalf("bwrap: %v\n%s", err, out)
		}
		ds = append(ds, time.Since(t0))
	}
	reportP50(b, ds)
	reportChildCPU(b, cpu)
}

// BenchmarkStopPolite: Stop without a deadline while an Exec is running,
// until that Exec has returned (the command ends on SIGTERM). Start and
// Destroy are not timed.
func BenchmarkStopPolite(b *testing.B) {
	nb := requireNative(b)
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		b.StopTimer()
		spec := newSpec(b)
		sb, err := nb.Start(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		returned := make(chan struct{})
		go func() {
			sb.Runner().Exec(ctx, runner.ExecRequest{Shell: "echo > /workspace/started; sleep 100"}, nil, nil)
			close(returned)
		}()
		for {
			if _, err := os.Stat(filepath.Join(spec.Workspace, "started")); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		t0 := time.Now()
		sb.Stop(ctx)
		<-returned
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		sb.Destroy(ctx)
		b.StartTimer()
	}
	reportP50(b, ds)
}
