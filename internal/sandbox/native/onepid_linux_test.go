package native_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// taskScript prints, for every thread of pid 1, its id and the status
// lines that say how it is confined.
const taskScript = `for s in /proc/1/task/[0-9]*/status; do
	t=${s#/proc/1/task/}; t=${t%/status}
	grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' "$s" | sed "s/^/$t /"
done`

// pid1Tasks runs taskScript in sb: thread id -> status field -> value.
func pid1Tasks(t *testing.T, sb sandbox.Sandbox) map[string]map[string]string {
	t.Helper()
	res := run(t, sb, taskScript)
	tasks := map[string]map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("task status line %q\n%s", l, res.Stderr)
		}
		if tasks[f[0]] == nil {
			tasks[f[0]] = map[string]string{}
		}
		tasks[f[0]][strings.TrimSuffix(f[1], ":")] = f[2]
	}
	return tasks
}

// TestEveryThreadOfPid1Confined: pid 1 serves the runner itself, so each
// of its threads (they share one address space) must be as confined as
// the agent: seccomp on (one filter at least), no_new_privs, no
// capability in any set, the bounding set included. It checks the threads
// there are when the sandbox is ready (the main thread, made long before
// confinement, among them) and those the runtime makes later, while many
// commands run at once (each waits in a thread of its own).
func TestEveryThreadOfPid1Confined(t *testing.T) {
	b := requireNative(t)
	sb := start(t, b, newSpec(t))
	before := pid1Tasks(t, sb)
	if before["1"] == nil {
		t.Fatalf("no main thread among pid 1's tasks: %v", before)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb.Runner().Exec(ctx, runner.ExecRequest{Shell: "sleep 1"}, nil, nil)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	after := pid1Tasks(t, sb)
	wg.Wait()
	var made []string
	for tid := range after {
		if before[tid] == nil {
			made = append(made, tid)
		}
	}
	if len(made) == 0 {
		t.Fatalf("pid 1 made no thread while 16 commands ran (%d before, %d after): the check proves nothing", len(before), len(after))
	}
	for _, tasks := range []map[string]map[string]string{before, after} {
		for tid, st := range tasks {
			n, _ := strconv.Atoi(st["Seccomp_filters"])
			bad := st["Seccomp"] != "2" || n < 1 || st["NoNewPrivs"] != "1"
			for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
				bad = bad || st[k] != "0000000000000000"
			}
			if bad {
				t.Errorf("thread %d of pid 1 is not confined: %v", must(strconv.Atoi(tid)), st)
			}
		}
	}
	t.Logf("%d threads at ready, %d made later, all confined", len(before), len(made))
}

func must[T any](v T, _ error) T { return v }

// TestSignalsFromInsideSpareThePid1 sends pid 1, from a command, every
// signal the Go runtime would exit or crash on by default (and the ones
// the kernel never delivers to a pid 1 from inside): the runner must go
// on serving, the same process.
func TestSignalsFromInsideSpareThePid1(t *testing.T) {
	b := requireNative(t)
	sb := start(t, b, newSpec(t))
	res := run(t, sb, `for s in KILL STOP QUIT ABRT ILL TRAP BUS SEGV FPE SYS USR1 USR2 PIPE ALRM XCPU XFSZ VTALRM STKFLT TSTP TTIN TTOU; do
	kill -s $s 1 2>/dev/null && echo "sent $s"
	for t in /proc/1/task/[0-9]*; do kill -s $s ${t#/proc/1/task/} 2>/dev/null; done
done; kill -s CONT 1 2>/dev/null; sleep 0.3; echo done`)
	if !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("the signalling command did not finish: %v %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	sent := strings.Join(strings.Fields(strings.ReplaceAll(string(res.Stdout), "sent ", "")), " ")
	res = run(t, sb, `echo alive; grep State /proc/1/status`)
	if !strings.HasPrefix(string(res.Stdout), "alive") || strings.Contains(string(res.Stdout), "stopped") {
		t.Fatalf("pid 1 after the signals: %s %s", res.Stdout, res.Stderr)
	}
	t.Logf("signals the kernel let through to pid 1: %s", sent)
}

// TestCrashEndsTheSandbox: pid 1 is the runner, with no other process to
// start another. When it dies (killed here from the host, as a crash
// would end it), the whole sandbox ends with it and a call in flight
// fails at once with ErrClosed, rather than redialling a socket nothing
// will serve again.
func TestCrashEndsTheSandbox(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	sb := start(t, b, spec)
	pid, ns := initOf(t, os.Getpid())
	returned := make(chan error, 1)
	go func() {
		_, err := sb.Runner().Exec(context.Background(), runner.ExecRequest{Shell: detachScript + " echo > /workspace/started; sleep 100"}, nil, nil)
		returned <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(spec.Workspace + "/started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case err := <-returned:
		if !errors.Is(err, runner.ErrClosed) {
			t.Fatalf("exec across pid 1's death: %v, want %v", err, runner.ErrClosed)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not fail when pid 1 died")
	}
	for deadline := time.Now().Add(10 * time.Second); len(pidsInNamespace(ns)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived pid 1: %v", pidsInNamespace(ns))
		}
	}
}

// TestOrphansReapedExitCodesKept: pid 1 reaps the orphans of the
// sandbox (double-forked children, some in their own session) while
// commands with known exit codes run side by side: every exit code comes
// back right (pid 1 never takes the wait of a command it runs), and at
// the end no zombie is left.
func TestOrphansReapedExitCodesKept(t *testing.T) {
	b := requireNative(t)
	sb := start(t, b, newSpec(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	orphans := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				orphans <- nil
				return
			default:
			}
			res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: `for i in 1 2 3 4 5 6 7 8; do (sh -c 'exit 9' &); (setsid sh -c "sleep 0.00$i; exit 11" &); done`}, nil, nil)
			if err != nil || res.ExitCode != 0 {
				orphans <- fmt.Errorf("orphan maker: %v %+v", err, res)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				want := (w*40+i)%120 + 1
				res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: fmt.Sprintf("(true &); exit %d", want)}, nil, nil)
				if err != nil || res.ExitCode != want {
					errs <- fmt.Errorf("exit %d came back as %+v, %v", want, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-orphans; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	res := run(t, sb, `sleep 0.2; for i in 1 2 3 4 5 6 7 8 9 10; do z=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null); [ -z "$z" ] && exit 0; sleep 0.2; done; echo $z; exit 1`)
	if res.ExitCode != 0 {
		t.Fatalf("zombies left in the sandbox: %s", res.Stdout)
	}
}
