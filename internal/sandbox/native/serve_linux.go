package native

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/runner"
)

// serve is pid 1 in serve mode, once confined: it serves the runner's
// protocol on the host-made listener itself, forks every command from
// this thread (the one the sandboxed processes' Landlock domain comes
// from, see confine), reaps the orphans of the pid namespace, and says it
// is ready once the runner listens. It returns when the runner is done
// (a Stop's SIGTERM). There is no second process: if this one dies, its
// pid namespace and so the whole sandbox end with it, and the host sees
// the init exit (every call in flight fails with runner.ErrClosed).
func serve(c *config, fds *serveFiles, sigs <-chan os.Signal, st statusLine, enforced map[string]string, mk marks) int {
	ln, err := net.FileListener(fds.listener)
	fds.listener.Close()
	if err != nil {
		return st.fail("serve", fmt.Errorf("listener: %w", err))
	}
	// The bridges dial the sockets through /proc/self/fd: the files must
	// not be collected (and closed) while the runner serves.
	defer runtime.KeepAlive(fds)
	// Every thread is confined, and threads made from now on are made
	// from confined ones: the runner may use as many as it likes.
	runtime.SetDefaultGOMAXPROCS()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		for s := range sigs {
			if s == unix.SIGTERM || s == unix.SIGINT || s == unix.SIGHUP {
				stop()
			}
		}
	}()
	forks := make(chan func())
	opts := runner.ServerOptions{
		Root:        WorkDir,
		Env:         c.Env,
		NoWatchdog:  true, // the pid namespace ends with this process
		ReapOrphans: true,
		StartCmd: func(cmd *exec.Cmd) error {
			errc := make(chan error, 1)
			forks <- func() { errc <- cmd.Start() }
			return <-errc
		},
	}
	if fds.proxy != nil {
		opts.ProxySocket = "/proc/self/fd/" + strconv.Itoa(int(fds.proxy.Fd()))
		opts.ProxyListen = fmt.Sprintf("127.0.0.1:%d", proxyPort)
	}
	if fds.gateway != nil {
		opts.GatewaySocket = "/proc/self/fd/" + strconv.Itoa(int(fds.gateway.Fd()))
		opts.GatewayListen = fmt.Sprintf("127.0.0.1:%d", gatewayPort)
	}
	ready := false
	opts.Ready = func() {
		ready = true
		mk.add("init-serving")
		st.report(status{OK: true, Enforced: enforced, Marks: mk})
	}
	done := make(chan error, 1)
	go func() { done <- runner.Serve(ctx, ln, opts) }()
	for {
		select {
		case f := <-forks:
			f()
		case err := <-done:
			switch {
			case err == nil:
				return 0
			case !ready:
				return st.fail("serve", err)
			}
			fmt.Fprintln(os.Stderr, "agentrun "+entryName+" serve:", err)
			return 1
		}
	}
}
