package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/inheritedfd"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
	"github.com/agentrun/agentrun/internal/supervisor/ahead"
	"golang.org/x/sys/unix"
)

// Inherited descriptors (see Spawn); a pending supervisor (Prespawn)
// has only its socket, at fd 3.
const (
	lockFD    = 3
	handoffFD = 4
	pendingFD = 3
)

// Main is the `agentrun __supervise` entry point: it works on one run to
// its end and returns the process exit code (0 when it ran the run to an
// end state, whatever the state). wire builds the seams for the data
// directory home (internal/wire); prewarm starts ahead what the named
// sandbox backend can start before its spec is known (a supervisor
// started ahead of its run, told the backend the run will likely use,
// does so while it waits).
func Main(args []string, wire func(home string) (Deps, error), prewarm func(backend string)) int {
	fs := flag.NewFlagSet("__supervise", flag.ContinueOnError)
	home := fs.String("home", "", "data directory")
	id := fs.String("id", "", "run id")
	maxParallel := fs.Int("max-parallel", 1, "concurrency limit")
	pending := fs.Bool("pending", false, "wait on fd 3 for the run (Prespawn)")
	// Read by package warmstart's initializer, which has started the
	// native sandbox's init when it is set.
	fs.Bool(strings.TrimPrefix(warmstart.Flag, "--"), false, "the initializer started the native sandbox's init")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// A detached supervisor holds nothing of its starter's but what it is
	// given (package inheritedfd): a shell's or a harness's pipe it kept
	// would not end until the run did, and would reach what it starts.
	own := []int{lockFD, handoffFD}
	if *pending {
		own = []int{pendingFD}
	}
	if _, err := inheritedfd.Close(own...); err != nil {
		// Not the sandbox's boundary (its init closes what it inherited):
		// the run goes on.
		fmt.Fprintf(os.Stderr, "supervise: warning: close inherited descriptors: %v\n", err)
	}
	var lockFile, waiter *os.File
	var ho Handoff
	if *pending {
		pr, lease, conn, ok := waitForRun(prewarm)
		if !ok {
			return 0 // the submit made no run
		}
		*id, *maxParallel, ho, lockFile, waiter = pr.ID, pr.MaxParallel, pr.Handoff, lease, conn
	}
	if err := run.ValidateID(*id); err != nil || *home == "" {
		fmt.Fprintln(os.Stderr, "supervise: need --home and a valid --id")
		return 2
	}
	if !*pending {
		// The inherited lock and handoff must not leak into anything
		// started from here (the sandbox, the agent): the lock would
		// outlive us.
		unix.CloseOnExec(lockFD)
		unix.CloseOnExec(handoffFD)
		lockFile = os.NewFile(lockFD, "supervisor.lock")
		var err error
		if ho, err = readHandoff(os.NewFile(handoffFD, "handoff")); err != nil {
			fmt.Fprintf(os.Stderr, "supervise %s: %v\n", *id, err)
			return 1
		}
	}
	deps, err := wire(*home)
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: %v\n", *id, err)
		return 1
	}
	lease, err := adopt(deps.Coord, *id, lockFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: %v\n", *id, err)
		return 1
	}
	ctx, stop := signalContext()
	defer stop()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	s := &Supervisor{Deps: deps, ID: *id, MaxParallel: *maxParallel, Handoff: ho, Lease: lease, Waiter: waiter}
	err = s.Run(ctx)
	if deps.Layers != nil {
		// A spare for the next workspace on the run's commit, made while
		// the agent worked, is finished rather than left half made.
		deps.Layers.WaitSpares()
	}
	if deps.WaitHomeSpares != nil {
		deps.WaitHomeSpares()
	}
	runtime.KeepAlive(lease) // the lease is released when the process exits
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervise %s: %v\n", *id, err)
		return 1
	}
	return 0
}

// waitForRun is a pending supervisor's wait for its run (fd 3; see
// Prespawn): false when none comes. First comes the sandbox backend the
// run will likely use, which prewarm starts ahead while the run comes.
// Once the run has come, the process's stdout and stderr are the run's
// supervisor.log, and the socket stays open: the submit that started us
// may wait on it for the run's changes (Supervisor.Waiter).
func waitForRun(prewarm func(backend string)) (*pendingRun, *os.File, *os.File, bool) {
	unix.CloseOnExec(pendingFD)
	conn := os.NewFile(pendingFD, "handoff")
	backend, err := ahead.ReadBackend(pendingFD)
	if err != nil {
		conn.Close()
		return nil, nil, nil, false // the submit made no run
	}
	if prewarm != nil {
		prewarm(backend) // "" too: what the initializer started ahead goes
	}
	pr, lease, logf, err := receiveRun(conn)
	if err != nil || pr == nil {
		conn.Close()
		return nil, nil, nil, false // no log to tell yet: the run is not ours
	}
	defer logf.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(logf.Fd()), fd); err != nil {
			lease.Close()
			conn.Close()
			return nil, nil, nil, false
		}
	}
	return pr, lease, conn, true
}

// adopt takes over the lease the spawner handed down as fd 3.
func adopt(co coord.Coordinator, id string, f *os.File) (coord.Lease, error) {
	ho, ok := co.(coord.Handover)
	if !ok {
		return nil, errors.New("the coordinator cannot take over a lease from another process")
	}
	return ho.Adopt(id, f)
}

// errStopSignal is the cause of the supervisor's context when it is told
// to stop (SIGTERM/SIGINT).
var errStopSignal = errors.New("the supervisor was told to stop")

func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if _, ok := <-ch; ok {
			cancel(errStopSignal)
		}
	}()
	return ctx, func() { signal.Stop(ch); close(ch); cancel(nil) }
}

func readHandoff(f *os.File) (Handoff, error) {
	var h Handoff
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHandoff+1))
	if err != nil {
		return h, fmt.Errorf("read handoff: %w", err)
	}
	if len(b) == 0 {
		return h, nil
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("read handoff: %w", err)
	}
	return h, nil
}

// Supervisor works on one run.
type Supervisor struct {
	Deps
	ID          string
	MaxParallel int
	Handoff     Handoff
	// Lease is the run's lease, held for the supervisor's whole life.
	Lease coord.Lease
	// Poll is the queue polling interval (default 25ms).
	Poll time.Duration
	// InProcess says that the supervisor runs inside a process that is not
	// its own (a worker, which supervises many runs): no start time is
	// recorded with its PID, so a cancel never signals that process (which
	// would stop every run in it) and the supervisor sees the cancel
	// request when it rereads the run.
	InProcess bool
	// Cancelled, when it closes, tells the supervisor that the run's
	// cancel was asked for (an agent host told so by the server) before
	// its next reread of the run would: the run then ends as a cancel
	// seen there ends it. With it set, the rereads are a backup only,
	// and seldom (cancelBackupPoll).
	Cancelled <-chan struct{}
	// Waiter, when set, is the socket a submit that started this
	// supervisor ahead (Prespawn) waits on: a byte is sent on it at every
	// change of the run's state, so that the submit's wait reads the
	// record when it changes instead of at its next poll. It closes with
	// the process.
	Waiter *os.File

	// release stops the sandbox and the proxy; it runs once, before the
	// run's end state is stored, so that a run seen ended has nothing left
	// running.
	release     func()
	releaseOnce sync.Once
	// settle finishes what release left for later (the sandbox's
	// teardown, once nothing runs in it): Run returns after it, so a
	// supervisor gone has left nothing of the run behind.
	settle func()

	// pending are record changes for the next state change (record.go).
	pendingMu sync.Mutex
	pending   []func(*run.Run)
}

func (s *Supervisor) releaseResources() {
	if s.release != nil {
		s.releaseOnce.Do(s.release)
	}
}

// Run drives the run to an end state. A panic ends the run failed with
// reason internal_error. The returned error is for the supervisor log.
func (s *Supervisor) Run(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("internal error: %v", p)
			fmt.Fprintf(os.Stderr, "panic: %v\n%s", p, debug.Stack())
			s.finish(run.StateFailed, run.ReasonInternal, msg)
			err = errors.New(msg)
		}
		s.releaseResources()
		if s.settle != nil {
			s.settle()
		}
		s.clearSupervisor()
	}()
	return s.execute(ctx)
}
