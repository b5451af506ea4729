package runner

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main is the hidden `agentrun __runner` entry point: it listens on a unix
// socket and serves until the listener is closed, it is signalled (SIGTERM,
// SIGINT), its stdin (when a pipe) reaches EOF, or its parent dies. It
// prints nothing but a fatal error.
//
//	--socket PATH        unix socket to listen on (a stale socket is replaced)
//	--root DIR           workspace root (default: the current directory)
//	--state DIR          state dir for the request journal
//	--proxy-socket PATH  egress proxy socket to bridge to
//	--proxy-listen ADDR  TCP address of the bridge (e.g. 127.0.0.1:3128)
//	--env-file PATH      base environment, NUL- or newline-separated
//	                     KEY=VALUE; without it the environment is inherited
func Main(args []string) int {
	fs := flag.NewFlagSet("__runner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "")
	root := fs.String("root", "", "")
	state := fs.String("state", "", "")
	proxySocket := fs.String("proxy-socket", "", "")
	proxyListen := fs.String("proxy-listen", "", "")
	envFile := fs.String("env-file", "", "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, "agentrun __runner:", err)
		return 2
	}
	if err := mainErr(*socket, *root, *state, *proxySocket, *proxyListen, *envFile); err != nil {
		fmt.Fprintln(os.Stderr, "agentrun __runner:", err)
		return 1
	}
	return 0
}

func mainErr(socket, root, state, proxySocket, proxyListen, envFile string) error {
	if socket == "" {
		return errors.New("--socket is required")
	}
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root = wd
	}
	env := os.Environ()
	if envFile != "" {
		b, err := os.ReadFile(envFile)
		if err != nil {
			return fmt.Errorf("read env file: %w", err)
		}
		env = parseEnv(b)
	}
	if fi, err := os.Lstat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(socket)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	// Only the owner (the supervisor's side) may connect.
	if err := os.Chmod(socket, 0o600); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchStdin(cancel)
	watchParent(ctx, cancel)
	return Serve(ctx, ln, ServerOptions{Root: root, Env: env, StateDir: state, ProxySocket: proxySocket, ProxyListen: proxyListen})
}

// parseEnv reads KEY=VALUE entries separated by NUL (or by newlines when
// there is no NUL).
func parseEnv(b []byte) []string {
	sep := []byte{0}
	if !bytes.Contains(b, sep) {
		sep = []byte{'\n'}
	}
	var env []string
	for _, kv := range bytes.Split(b, sep) {
		s := string(kv)
		if strings.Contains(s, "=") && !strings.HasPrefix(s, "=") {
			env = append(env, s)
		}
	}
	return env
}

// watchStdin stops the runner when stdin is a pipe or socket and reaches
// EOF: the parent that holds its other end is gone.
func watchStdin(stop func()) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
}

// watchParent stops the runner when it is reparented (its parent died).
func watchParent(ctx context.Context, stop func()) {
	ppid := os.Getppid()
	if ppid <= 1 {
		return
	}
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != ppid {
					stop()
					return
				}
			}
		}
	}()
}
