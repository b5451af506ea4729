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
		StateDir:      stateDir,
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
