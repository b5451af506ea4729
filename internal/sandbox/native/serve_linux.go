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
		opts.Forwards = c.Forwards
	}
	if fds.gateway != nil {
		opts.GatewaySocket = "/proc/self/fd/" + strconv.Itoa(int(fds.gateway.Fd()))
		opts.GatewayListen = fmt.Sprintf("127.0.0.1:%d", gatewayPort)
	}
	ready := false
	opts.Ready = func() {
		ready = true
		mk.add("init-serving")
		st.reportReady(status{OK: true, Enforced: enforced, Marks: mk})
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
				if err := quiesce(); err != nil {
					// The host waits for this process's exit instead,
					// which kills and reaps whatever is left.
					fmt.Fprintln(os.Stderr, "agentrun "+entryName+" serve: stop:", err)
					return 0
				}
				st.reportStopped()
				// Nothing runs here any more. Exiting would tear the
				// namespaces down now (see quiesce): the host kills this
				// process when it destroys the sandbox, after what it
				// does first with the workspace.
				for range sigs {
				}
				return 0
			case !ready:
				return st.fail("serve", err)
			}
			fmt.Fprintln(os.Stderr, "agentrun "+entryName+" serve:", err)
			return 1
		}
	}
}

// quiesce ends every process left in the sandbox and reaps it, before
// pid 1 exits. The runner has ended its commands' groups; what is left
// (a daemon that left its group, an orphan's children) gets SIGKILL here
// rather than in the kernel's teardown of the pid namespace: kill(-1)
// from pid 1 reaches every process of its namespace but itself (they run
// as its user, and none has a capability to refuse it), and a fork racing
// it fails, the forking process having SIGKILL pending. Once wait4 finds
// no child left, nothing of the sandbox runs: the host may read the
// workspace, and pid 1 waits for the host to kill it (Destroy), whose
// exit then tears the namespaces down. Unmounting the overlays syncs the
// file system of their upper layers, milliseconds on a journaled one,
// which the run's export and end need not wait for, nor have their
// fsyncs wait behind. A process that does not die keeps this waiting:
// the host kills pid 1 after its grace, as before.
func quiesce() error {
	if err := unix.Kill(-1, unix.SIGKILL); err != nil && err != unix.ESRCH {
		return fmt.Errorf("kill what is left: %w", err)
	}
	for {
		_, err := unix.Wait4(-1, nil, unix.WALL, nil)
		switch err {
		case nil, unix.EINTR:
		case unix.ECHILD:
			return nil
		default:
			return fmt.Errorf("reap what is left: %w", err)
		}
	}
}
