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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main is the hidden "__sandbox" entry point: "init" is pid 1 of a new
// sandbox (started by Start), "serve" is the runner it forks.
func Main(args []string) int {
	if len(args) == 1 {
		switch args[0] {
		case roleInit:
			return initMain()
		case roleServe:
			return serveMain()
		}
	}
	fmt.Fprintln(os.Stderr, "agentrun "+entryName+": internal entry point, not a command")
	return 2
}

// maxServeRestarts bounds how often the init restarts a runner that died.
const maxServeRestarts = 3

func initMain() int {
	var mk marks
	mk.add("init-main")
	// Never unlocked: Landlock is per thread, and the sandboxed program
	// is forked from this thread.
	runtime.LockOSThread()
	// Not dumpable, before anything else: no process inside may open the
	// init's memory (its config names host paths; its threads share one
	// address space), descriptors or environment through /proc, even as
	// the same user. Its children are again dumpable after their exec.
	dumpErr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	st := statusLine{os.NewFile(statusFD, "status")}
	cfg := os.NewFile(cfgFD, "config")
	cfgR := bufio.NewReader(io.LimitReader(cfg, maxConfigLen))
	c, err := readConfig(cfgR)
	if err != nil {
		return st.fail("config", err)
	}
	if dumpErr != nil {
		return st.fail("config", fmt.Errorf("set not dumpable: %w", dumpErr))
	}
	for _, fd := range []int{cfgFD, statusFD, listenerFD} {
		unix.CloseOnExec(fd)
	}
	// Handlers (not SIG_IGN, which children would inherit): pid 1 passes
	// these on to its program instead of dying.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)

	enforced := map[string]string{}
	fds, failed := prepareSandbox(c, cfg, cfgR, enforced, &mk)
	if failed != nil {
		return st.fail(failed.step, failed.err)
	}
	if c.Mode == modeProbe {
		// A throwaway thread-confinement check: this process exits next.
		cf, err := confine(c, nil)
		if err != nil {
			return st.fail("confine", err)
		}
		maps.Copy(enforced, cf)
		mk.add("init-confined")
		st.report(status{OK: true, Enforced: enforced, Marks: mk})
		return 0
	}
	cf, err := confine(c, fds)
	if err != nil {
		return st.fail("confine", err)
	}
	maps.Copy(enforced, cf)
	mk.add("init-confined")
	pid, err := startProgram(c, fds)
	if err != nil {
		return st.fail("start", err)
	}
	mk.add("init-program-started")
	st.report(status{OK: true, Enforced: enforced, Marks: mk})
	return supervise(c, fds, pid, sigs)
}

// statusLine is how the init tells the host how its setup went: one JSON
// line on the status descriptor, which is closed after it.
type statusLine struct{ f *os.File }

func (l statusLine) report(s status) {
	b, _ := json.Marshal(s)
	l.f.Write(append(b, '\n'))
	l.f.Close()
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
// descriptors (serve mode), the root, the network and the rlimits (added
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

// supervise is pid 1 once the program runs: it passes the signals it
// gets on to the program, reaps every child and returns the program's
// exit code. It runs on the init's confined thread, so a runner that died
// on its own is forked again from there.
func supervise(c *config, fds *serveFiles, pid int, sigs <-chan os.Signal) int {
	var stopping atomic.Bool
	var current atomic.Int64
	current.Store(int64(pid))
	go func() {
		for s := range sigs {
			if s == unix.SIGTERM || s == unix.SIGINT || s == unix.SIGHUP {
				stopping.Store(true)
			}
			unix.Kill(int(current.Load()), s.(syscall.Signal))
		}
	}()
	restarts := 0
	for {
		code, died := reapUntil(pid)
		if !died || c.Mode != modeServe || code == 0 || stopping.Load() || restarts >= maxServeRestarts {
			return code
		}
		// The runner died on its own: end whatever it left running (its
		// commands' groups, anything they started), then start another on
		// the same listener; its journal turns resent requests into
		// CodeInterrupted.
		restarts++
		killAll()
		var err error
		if pid, err = startProgram(c, fds); err != nil {
			fmt.Fprintln(os.Stderr, "agentrun "+entryName+": restart runner:", err)
			return 70
		}
		current.Store(int64(pid))
	}
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

// serveFiles are the descriptors every runner the init starts gets. They
// are held for the init's lifetime (an unreferenced os.File closes its
// descriptor when collected). Nothing inside reaches them by a path: the
// init and the runner are not dumpable, so not through /proc either.
type serveFiles struct {
	listener *os.File // the host-made listening socket
	state    *os.File // the private state mount (privateState)
	exe      int      // the agentrun binary (O_PATH, at exeFD)
	proxy    *os.File // the egress proxy's socket (O_PATH), or nil
	gateway  *os.File // the model gateway's socket (O_PATH), or nil
}

// exeFD is where the init holds the agentrun binary: above any
// descriptor a child's fd shuffle before its exec can use.
const exeFD = 100

// openServeFiles opens what a runner needs from the host, before the
// pivot: the binary it runs, the sockets it bridges to, its state.
func openServeFiles(c *config) (*serveFiles, error) {
	fds := &serveFiles{listener: os.NewFile(listenerFD, "listener"), exe: -1}
	fd, err := unix.Open(c.Executable, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the agentrun binary: %w", err)
	}
	if err := unix.Dup3(fd, exeFD, unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("hold the agentrun binary: %w", err)
	}
	unix.Close(fd)
	fds.exe = exeFD
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
	if fds.proxy, err = sock(c.ProxySocket); err != nil {
		return nil, err
	}
	if fds.gateway, err = sock(c.GatewaySocket); err != nil {
		return nil, err
	}
	st, err := privateState(c)
	if err != nil {
		return nil, err
	}
	fds.state = os.NewFile(uintptr(st), "runner state")
	return fds, nil
}

// startProgram forks the sandboxed program from this (confined) thread;
// a runner gets fds' listener as its fd 4 and the state as its fd 5.
func startProgram(c *config, fds *serveFiles) (int, error) {
	attr := &os.ProcAttr{Dir: WorkDir, Env: c.Env, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	switch c.Mode {
	case modeExec:
		path, err := lookPath(c.Argv[0], c.Env)
		if err != nil {
			return 0, err
		}
		attr.Files = []*os.File{os.Stdin, os.Stdout, os.Stderr}
		p, err := os.StartProcess(path, c.Argv, attr)
		if err != nil {
			return 0, err
		}
		return p.Pid, nil
	case modeServe:
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		sc := serveConfig{Env: c.Env}
		if c.ProxySocket != "" {
			sc.ProxySocket = "/proc/self/fd/" + strconv.Itoa(serveProxyFD)
			sc.ProxyListen = fmt.Sprintf("127.0.0.1:%d", proxyPort)
		}
		if c.GatewaySocket != "" {
			sc.GatewaySocket = "/proc/self/fd/" + strconv.Itoa(serveGatewayFD)
			sc.GatewayListen = fmt.Sprintf("127.0.0.1:%d", gatewayPort)
		}
		b, _ := json.Marshal(sc)
		go func() {
			w.Write(b)
			w.Close()
		}()
		null, err := os.Open(os.DevNull)
		if err != nil {
			return 0, err
		}
		defer null.Close()
		attr.Files = []*os.File{null, os.Stdout, os.Stderr, r, fds.listener, fds.state, fds.proxy, fds.gateway}
		attr.Sys.Setsid = true
		// The child resolves the path before its exec closes exeFD.
		p, err := os.StartProcess("/proc/self/fd/"+strconv.Itoa(fds.exe), []string{"agentrun", entryName, roleServe}, attr)
		if err != nil {
			return 0, err
		}
		return p.Pid, nil
	}
	return 0, fmt.Errorf("mode %q starts no program", c.Mode)
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

// killAll kills every other process of the pid namespace (kill(-1) from
// pid 1 spares only pid 1) and reaps them all. The kernel refuses a fork
// in a process a signal to many is being delivered to, so nothing escapes.
func killAll() {
	unix.Kill(-1, unix.SIGKILL)
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: nothing left
		}
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
