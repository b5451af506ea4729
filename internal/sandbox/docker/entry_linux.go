package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox/seccomp"
)

// Main is the "__docker" entry point, run inside the container from the
// read-only mounted agentrun binary: "init" as pid 1, which starts
// "serve" (the runner) and reaps every orphan; it needs nothing of the
// image (no shell, no libc).
func Main(args []string) int {
	if len(args) == 1 {
		switch args[0] {
		case roleInit:
			return initMain()
		case roleServe:
			return serveMain()
		}
	}
	fmt.Fprintln(os.Stderr, "agentrun "+EntryName+": internal entry point, not a command")
	return 2
}

// initMain is pid 1: it checks its confinement, starts the runner with
// the config on a pipe, forwards SIGTERM and SIGINT to it, and reaps
// every process that ends in the container. It exits with the runner's
// status; the kernel then ends everything else in the pid namespace.
func initMain() int {
	// Not dumpable: no process inside may read its environment (the
	// config) or descriptors through /proc, even as the same user.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("init", fmt.Errorf("set not dumpable: %w", err))
	}
	cfg := os.Getenv(configEnv)
	os.Unsetenv(configEnv)
	if err := checkConfined(); err != nil {
		return fail("init", err)
	}
	// The engine's seccomp profile may allow what the native sandbox
	// refuses (Podman's lets a process without capabilities make a user
	// namespace and use the kernel's keyrings): ours goes over it, on
	// every thread, before the runner starts; everything inherits it.
	if err := seccomp.LoadAllThreads(); err != nil {
		return fail("init", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail("init", err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	p, err := os.StartProcess("/proc/self/exe", []string{"agentrun", EntryName, roleServe}, &os.ProcAttr{
		Dir:   WorkDir,
		Env:   []string{},
		Files: []*os.File{nil, os.Stdout, os.Stderr, r},
	})
	r.Close()
	if err != nil {
		return fail("init", fmt.Errorf("start the runner: %w", err))
	}
	go func() {
		w.Write([]byte(cfg))
		w.Close()
	}()
	go func() {
		for s := range sigs {
			p.Signal(s)
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail("init", fmt.Errorf("wait: %w", err))
		}
		if pid != p.Pid {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// checkConfined refuses to serve in a container that is not what the
// host asked for, whatever the engine reported: no capability in any
// set, no_new_privs, and a read-only root.
func checkConfined() error {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read own status: %w", err)
	}
	defer f.Close()
	seen := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			seen[k] = strings.TrimSpace(v)
		}
	}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if v, ok := seen[k]; !ok || strings.Trim(v, "0") != "" {
			return fmt.Errorf("the container holds capabilities (%s %s): the engine did not drop them", k, v)
		}
	}
	if seen["NoNewPrivs"] != "1" {
		return errors.New("no_new_privs is not set: the engine did not apply no-new-privileges")
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		return fmt.Errorf("statfs /: %w", err)
	}
	if st.Flags&unix.ST_RDONLY == 0 {
		return errors.New("the root file system is writable: the engine did not make it read-only")
	}
	return nil
}

// serveMain is the runner: config on fd 3, its connection dialled out to
// the host's mounted socket, bridges to the mounted proxy and gateway
// sockets.
func serveMain() int {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("serve", fmt.Errorf("set not dumpable: %w", err))
	}
	cf := os.NewFile(serveCfgFD, "config")
	b, err := io.ReadAll(io.LimitReader(cf, maxConfigLen))
	cf.Close()
	if err != nil {
		return fail("serve", fmt.Errorf("read config: %w", err))
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return fail("serve", fmt.Errorf("parse config: %w", err))
	}
	if len(c.Token) != tokenLen {
		return fail("serve", errors.New("the config has no token for the host's socket"))
	}
	// The runner connects out to the host: see link.go.
	ln := dialOut(innerLink, c.Token)
	opts := runner.ServerOptions{Root: WorkDir, Env: c.Env, NoWatchdog: true}
	if c.ProxyListen != "" {
		opts.ProxySocket, opts.ProxyListen, opts.Forwards = innerProxy, c.ProxyListen, c.Forwards
	}
	if c.GatewayListen != "" {
		opts.GatewaySocket, opts.GatewayListen = innerGate, c.GatewayListen
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := runner.Serve(ctx, ln, opts); err != nil {
		return fail("serve", err)
	}
	return 0
}

func fail(role string, err error) int {
	fmt.Fprintf(os.Stderr, "agentrun %s %s: %v\n", EntryName, role, err)
	return 1
}
