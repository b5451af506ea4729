package native

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
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
	// Never unlocked: the confinement is per thread, and the sandboxed
	// program is forked from this thread.
	runtime.LockOSThread()
	st := os.NewFile(statusFD, "status")
	report := func(s status) {
		b, _ := json.Marshal(s)
		st.Write(append(b, '\n'))
		st.Close()
	}
	fail := func(step string, err error) int {
		report(status{Step: step, Error: err.Error()})
		return 70
	}
	cfg := os.NewFile(cfgFD, "config")
	cfgR := bufio.NewReader(io.LimitReader(cfg, maxConfigLen))
	c, err := readConfig(cfgR)
	if err != nil {
		return fail("config", err)
	}
	for _, fd := range []int{cfgFD, statusFD, listenerFD} {
		unix.CloseOnExec(fd)
	}
	// Handlers (not SIG_IGN, which children would inherit): pid 1 passes
	// these on to its program instead of dying.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)

	enforced := map[string]string{}
	merge := func(m map[string]string) {
		for k, v := range m {
			enforced[k] = v
		}
	}
	if err := buildRoot(c); err != nil {
		return fail("root", err)
	}
	if err := setupNet(); err != nil {
		return fail("network", err)
	}
	rl, err := setRlimits(c)
	if err != nil {
		return fail("rlimits", err)
	}
	merge(rl)
	// Nothing sandboxed runs before the host has put this process in its
	// cgroups (children inherit them): the root was built meanwhile.
	if err := awaitGo(cfgR); err != nil {
		return fail("cgroups", err)
	}
	cfg.Close()
	if c.Mode == modeProbe {
		// A throwaway thread-confinement check: this process exits next.
		cf, err := confine(c)
		if err != nil {
			return fail("confine", err)
		}
		merge(cf)
		report(status{OK: true, Enforced: enforced})
		return 0
	}
	cf, err := confine(c)
	if err != nil {
		return fail("confine", err)
	}
	merge(cf)
	pid, err := startProgram(c)
	if err != nil {
		return fail("start", err)
	}
	report(status{OK: true, Enforced: enforced})
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
		if pid, err = startProgram(c); err != nil {
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

// startProgram forks the sandboxed program from this (confined) thread.
func startProgram(c *config) (int, error) {
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
			sc.ProxySocket = innerProxy
			sc.ProxyListen = fmt.Sprintf("127.0.0.1:%d", proxyPort)
		}
		if c.GatewaySocket != "" {
			sc.GatewaySocket = innerGateway
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
		ln := os.NewFile(listenerFD, "listener")
		attr.Files = []*os.File{null, os.Stdout, os.Stderr, r, ln}
		attr.Sys.Setsid = true
		p, err := os.StartProcess(innerExe, []string{"agentrun", entryName, roleServe}, attr)
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
