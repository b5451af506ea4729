package native

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/inheritedfd"
	"github.com/agentrun/agentrun/internal/sandbox/native/execpriv"
)

// Main is the hidden "__sandbox" entry point: "init" is pid 1 of a new
// sandbox (started by Start), which serves the runner itself (serve mode)
// or runs one command (exec mode, Backend.Command). Started as agentrun
// is, the init does not get here: it runs from this package's init (see
// there).
func Main(args []string) int {
	if len(args) == 1 && args[0] == roleInit {
		return initMain()
	}
	fmt.Fprintln(os.Stderr, "agentrun "+entryName+": internal entry point, not a command")
	return 2
}

// caught are the signals pid 1 handles rather than dies of: the kernel
// spares pid 1 the ones it has no handler for, but the Go runtime has a
// handler for every signal, and by default it exits (or crashes) on these.
// A process inside may send them to pid 1: in serve mode SIGTERM, SIGINT
// and SIGHUP end the sandbox (as a Stop does), the others are ignored; in
// exec mode each is passed on to the command. Not SIGKILL or SIGSTOP: the
// kernel never delivers them to pid 1 from inside.
var caught = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE,
	unix.SIGABRT, unix.SIGALRM, unix.SIGILL, unix.SIGTRAP, unix.SIGSYS, unix.SIGSTKFLT, unix.SIGBUS, unix.SIGSEGV, unix.SIGFPE,
	unix.SIGXCPU, unix.SIGXFSZ, unix.SIGVTALRM}

// catchSignals installs the init's handlers and returns the channel its
// signals come on, and the function to call once the config has come.
func catchSignals() (<-chan os.Signal, func()) {
	// Handlers (not SIG_IGN, which children would inherit), before the
	// config: an init started ahead waits for it, so they cost the
	// sandbox's start nothing there. Each signal is a round trip to the
	// runtime's signal thread, locked to it as this goroutine is to the
	// main thread: a handoff of the processor each way, 38 for these,
	// 1 ms on an idle machine with 2 cores, about 2 ms at a load of 5
	// (done from a goroutine of its own meanwhile, it slowed the root's
	// build as much).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, caught...)
	// Until the config has come, a signal does what the runtime's own
	// handling did before these handlers: one that ends a Go program
	// (endsBeforeConfig) ends the init, so that an init started ahead
	// that is told to stop is not used (the host starts another); any
	// other is dropped.
	configured := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if slices.Contains(endsBeforeConfig, s) {
					fmt.Fprintf(os.Stderr, "agentrun %s: %v before its config: exiting\n", entryName, s)
					os.Exit(2)
				}
			case <-configured:
				return
			}
		}
	}()
	return sigs, func() { close(configured) }
}

// endsBeforeConfig are the caught signals that end a Go program with no
// handler for them, when another process sends them (os/signal: exit, with
// a stack dump for some); the runtime takes no action on the others (a
// SIGSEGV, SIGBUS or SIGFPE sent is not the program's fault).
var endsBeforeConfig = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGABRT, unix.SIGILL,
	unix.SIGTRAP, unix.SIGSYS, unix.SIGSTKFLT}

// The init runs from here, this package's init, rather than from main:
// the packages initialized after this one (about fifty of the binary's
// two hundred with init work: the server's, the CLI's, the SQL drivers',
// the metrics', MCP's) are then never initialized in pid 1, which uses
// none of them. Go initializes every package this one imports before it,
// and the init reaches nothing else (nor anything another package's init
// would have registered). It saves their init functions and the
// page faults of their code (about 860 instead of 1,080 until the init's
// first step).
//
// Pid 1's main thread, its thread group leader (the task a signal to
// pid 1 is checked against), is the one that forks every sandboxed
// process and carries their Landlock domain (see confine): the init's
// goroutine stays on it from the start, so that whether a process
// inside may signal pid 1 does not depend on where the runtime happened
// to move the goroutine.
func init() {
	if len(os.Args) > 2 && os.Args[1] == entryName && os.Args[2] == roleInit {
		runtime.LockOSThread()
		os.Exit(initMain())
	}
}

func initMain() int {
	var mk marks
	mk.add("init-main")
	// Never unlocked: this thread forks every sandboxed process, and it
	// alone has the Landlock scope they share (see confine).
	runtime.LockOSThread()
	// Not dumpable, before anything else: no process inside may open the
	// init's memory (its config names host paths; its threads share one
	// address space), descriptors or environment through /proc, even as
	// the same user. Its children are again dumpable after their exec.
	dumpErr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	st := statusLine{os.NewFile(statusFD, "status")}
	// Only the descriptors it is started with on purpose reach the
	// sandbox: the config and status pipes, and a cold init's listener.
	// Whatever else its starter left open (not close-on-exec) is closed
	// before anything else runs (package inheritedfd).
	warmed := len(os.Args) > 3 && os.Args[3] == roleWarm
	own := []int{cfgFD, statusFD}
	if !warmed {
		own = append(own, listenerFD)
	}
	if _, err := inheritedfd.Close(own...); err != nil {
		return st.fail("confine", fmt.Errorf("close inherited descriptors: %w", err))
	}
	// The bounding set, the ambient capabilities and no_new_privs went in
	// this process's package init (see package execpriv), on the fewest
	// threads; its marks come before init-main's.
	span, err := execpriv.Dropped()
	mk = append(marks{{Step: "init-runtime", At: span.Begin}, {Step: "init-exec-privileges", At: span.End}}, mk...)
	if err != nil {
		return st.fail("confine", err)
	}
	sigs, configured := catchSignals()
	mk.add("init-signals")
	// Started ahead of its sandbox (Backend.Prewarm), it gets its
	// listener and log first, on the config socket.
	listener := listenerFD
	if warmed {
		if listener, err = receiveFiles(); err != nil {
			return st.fail("config", err)
		}
	}
	cfg := os.NewFile(cfgFD, "config")
	cfgR := bufio.NewReader(io.LimitReader(cfg, maxConfigLen))
	c, err := readConfig(cfgR)
	if err != nil {
		return st.fail("config", err)
	}
	configured()
	c.listener = listener
	if !warmed && c.Mode != modeServe {
		// Started without a listener: fd 5 is not its own.
		if _, err := inheritedfd.Close(cfgFD, statusFD); err != nil {
			return st.fail("confine", fmt.Errorf("close inherited descriptors: %w", err))
		}
	}
	if warmed && c.Mode != modeServe {
		return st.fail("config", fmt.Errorf("an init started ahead serves a runner, not mode %q", c.Mode))
	}
	mk.add("init-config")
	if dumpErr != nil {
		return st.fail("config", fmt.Errorf("set not dumpable: %w", dumpErr))
	}
	for _, fd := range []int{cfgFD, statusFD, listener} {
		unix.CloseOnExec(fd)
	}

	enforced := map[string]string{}
	fds, failed := prepareSandbox(c, cfg, cfgR, enforced, &mk)
	if failed != nil {
		return st.fail(failed.step, failed.err)
	}
	cf, err := confine(c, &mk)
	if err != nil {
		return st.fail("confine", err)
	}
	maps.Copy(enforced, cf)
	mk.add("init-confined")
	switch c.Mode {
	case modeProbe:
		// A throwaway confinement check: this process exits next.
		st.report(status{OK: true, Enforced: enforced, Marks: mk})
		return 0
	case modeServe:
		return serve(c, fds, sigs, st, enforced, mk)
	}
	pid, err := startProgram(c)
	if err != nil {
		return st.fail("start", err)
	}
	mk.add("init-program-started")
	st.report(status{OK: true, Enforced: enforced, Marks: mk})
	return supervise(pid, sigs)
}

// statusLine is how the init tells the host how its setup went: one JSON
// line on the status descriptor, which is closed after it. In serve mode
// the descriptor stays open once the runner is ready (reportReady), for a
// second line when the sandbox has stopped (reportStopped).
type statusLine struct{ f *os.File }

func (l statusLine) report(s status) {
	l.reportReady(s)
	l.f.Close()
}

// reportReady writes s and keeps the descriptor open.
func (l statusLine) reportReady(s status) {
	b, _ := json.Marshal(s)
	l.f.Write(append(b, '\n'))
}

// reportStopped tells the host that no process of the sandbox runs any
// more but pid 1, which waits to be killed, and closes the descriptor.
func (l statusLine) reportStopped() {
	l.report(status{OK: true, Stopped: true})
}

// fail reports that step failed and returns the init's exit code.
func (l statusLine) fail(step string, err error) int {
	l.report(status{Step: step, Error: err.Error()})
	return 70
}

// stepFailure is a setup step that failed, named as the host is told.
type stepFailure struct {
	step string
	err  error
}

// prepareSandbox does the setup before confinement: the runner's
// sockets (serve mode), the root, the network and the rlimits (added
// to enforced); then it waits for the host to put this process in the
// sandbox's cgroups (cfg is closed after that) and checks that Landlock
// can confine it. mk gets the steps' ends.
func prepareSandbox(c *config, cfg *os.File, cfgR *bufio.Reader, enforced map[string]string, mk *marks) (*serveFiles, *stepFailure) {
	var fds *serveFiles
	if c.Mode == modeServe {
		// Before the pivot: the host paths are reachable only now.
		var err error
		if fds, err = openServeFiles(c); err != nil {
			return nil, &stepFailure{"root", err}
		}
	}
	// Before the root is built: its /proc/sys is read-only.
	if err := forwardLowPorts(c); err != nil {
		return nil, &stepFailure{"network", err}
	}
	if err := buildRoot(c); err != nil {
		return nil, &stepFailure{"root", err}
	}
	mk.add("init-root")
	if err := setupNet(); err != nil {
		return nil, &stepFailure{"network", err}
	}
	rl, err := setRlimits(c)
	if err != nil {
		return nil, &stepFailure{"rlimits", err}
	}
	maps.Copy(enforced, rl)
	mk.add("init-net")
	// Nothing sandboxed runs before the host has put this process in its
	// cgroups (children inherit them): the root was built meanwhile.
	if err := awaitGo(cfgR); err != nil {
		return nil, &stepFailure{"cgroups", err}
	}
	mk.add("init-go")
	cfg.Close()
	if landlockABI() == 0 && !c.AllowNoLandlock {
		return nil, &stepFailure{stepLandlock, errors.New(noLandlock)}
	}
	return fds, nil
}

// supervise is pid 1 once the command of exec mode runs: it passes the
// signals it gets on to the command, reaps every child and returns the
// command's exit code.
func supervise(pid int, sigs <-chan os.Signal) int {
	go func() {
		for s := range sigs {
			unix.Kill(pid, s.(syscall.Signal))
		}
	}()
	code, _ := reapUntil(pid)
	return code
}

// readConfig reads the config line the host sends first on fd 3.
func readConfig(r *bufio.Reader) (*config, error) {
	b, err := r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	switch c.Mode {
	case modeServe, modeProbe:
	case modeExec:
		if len(c.Argv) == 0 {
			return nil, errors.New("exec mode without a command")
		}
	default:
		return nil, fmt.Errorf("unknown mode %q", c.Mode)
	}
	return &c, nil
}

// awaitGo waits for the host's second line on fd 3, sent once this
// process is in the sandbox's cgroups.
func awaitGo(r *bufio.Reader) error {
	b, err := r.ReadBytes('\n')
	if err != nil || string(b) != goLine {
		return errors.New("the host did not confirm the cgroups")
	}
	return nil
}

// stepLandlock is the setup step that fails on a kernel without Landlock
// when the user did not opt in to run without it.
const stepLandlock = "landlock"

// serveFiles are what the runner needs from the host, opened before the
// pivot: the listening socket, and the egress proxy's and the model
// gateway's sockets (O_PATH, dialled through /proc/self/fd), held for the
// process's lifetime (an unreferenced os.File closes its descriptor when
// collected). Nothing inside reaches them by a path: pid 1 is not
// dumpable, so not through /proc either.
type serveFiles struct {
	listener *os.File
	proxy    *os.File // nil without egress
	gateway  *os.File // nil without the gateway
}

// openServeFiles opens the runner's sockets, before the pivot.
func openServeFiles(c *config) (*serveFiles, error) {
	fds := &serveFiles{listener: os.NewFile(uintptr(c.listener), "listener")}
	sock := func(p string) (*os.File, error) {
		if p == "" {
			return nil, nil
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open socket: %w", err)
		}
		return os.NewFile(uintptr(fd), "socket"), nil
	}
	var err error
	if fds.proxy, err = sock(c.ProxySocket); err != nil {
		return nil, err
	}
	if fds.gateway, err = sock(c.GatewaySocket); err != nil {
		return nil, err
	}
	return fds, nil
}

// startProgram forks exec mode's command from this (locked, confined)
// thread.
func startProgram(c *config) (int, error) {
	path, err := lookPath(c.Argv[0], c.Env)
	if err != nil {
		return 0, err
	}
	attr := &os.ProcAttr{Dir: WorkDir, Env: c.Env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	p, err := os.StartProcess(path, c.Argv, attr)
	if err != nil {
		return 0, err
	}
	return p.Pid, nil
}

// reapUntil reaps every child (orphans reparent to pid 1) until pid
// exits, and returns its exit code (128+signal when killed). died is
// false when no child is left at all.
func reapUntil(pid int) (code int, died bool) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 70, false
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return ws.ExitStatus(), true
	}
}

// lookPath resolves name on the PATH of the sandbox's environment.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in the sandbox", name)
}
