package native

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/runner"
)

// serveMain is the runner inside the sandbox, forked by the init with its
// config on fd 3 and the host-made listening socket on fd 4.
func serveMain() int {
	// Not dumpable: no process inside may open this one's memory or
	// descriptors (its state, above all), even as the same user.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return serveFail(fmt.Errorf("set not dumpable: %w", err))
	}
	// The state descriptor stays here: nothing the runner starts inherits it.
	for _, fd := range []int{serveStateFD, serveProxyFD, serveGatewayFD} {
		unix.CloseOnExec(fd)
	}
	cf := os.NewFile(serveCfgFD, "config")
	b, err := io.ReadAll(io.LimitReader(cf, maxConfigLen))
	cf.Close()
	if err != nil {
		return serveFail(fmt.Errorf("read config: %w", err))
	}
	var sc serveConfig
	if err := json.Unmarshal(b, &sc); err != nil {
		return serveFail(fmt.Errorf("parse config: %w", err))
	}
	lf := os.NewFile(serveListFD, "listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return serveFail(fmt.Errorf("listener: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	defer stop()
	err = runner.Serve(ctx, ln, runner.ServerOptions{
		Root:          WorkDir,
		Env:           sc.Env,
		StateDir:      runnerStateDir,
		ProxySocket:   sc.ProxySocket,
		ProxyListen:   sc.ProxyListen,
		GatewaySocket: sc.GatewaySocket,
		GatewayListen: sc.GatewayListen,
		NoWatchdog:    true,
	})
	if err != nil {
		return serveFail(err)
	}
	return 0
}

func serveFail(err error) int {
	fmt.Fprintln(os.Stderr, "agentrun "+entryName+" serve:", err)
	return 1
}
