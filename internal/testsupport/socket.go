package testsupport

// Real sockets for tests to talk to: echo servers on loopback TCP or on a
// unix socket, and short directories to put unix sockets in. An echo server
// answers each connection with exactly the bytes it received, then
// half-closes and closes once the peer has finished sending.

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// ShortDir is a fresh directory under os.TempDir, removed at cleanup. It is
// short on purpose: a unix socket path must fit in sun_path (108 bytes),
// which a t.TempDir path under a long test name may not.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "sk")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// EchoTCP serves an echo server on 127.0.0.1 and returns its port.
func EchoTCP(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	Echo(tb, ln)
	return ln.Addr().(*net.TCPAddr).Port
}

// EchoUnix serves an echo server on a unix socket at path ("" makes one in
// a ShortDir) and returns the socket's path.
func EchoUnix(tb testing.TB, path string) string {
	tb.Helper()
	if path == "" {
		path = filepath.Join(ShortDir(tb), "echo.sock")
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	Echo(tb, ln)
	return path
}

// Echo echoes every connection ln accepts until ln is closed, which
// happens at cleanup (or earlier, by the caller).
func Echo(tb testing.TB, ln net.Listener) { Serve(tb, ln, echo) }

// Serve hands every connection ln accepts to handle, which owns it, on a
// goroutine of its own, until ln is closed, which happens at cleanup (or
// earlier, by the caller).
func Serve(tb testing.TB, ln net.Listener, handle func(net.Conn)) {
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}

// ServeTCP serves handle (Serve) on 127.0.0.1 and returns its address.
func ServeTCP(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	Serve(tb, ln, handle)
	return ln.Addr().String()
}

func echo(c net.Conn) {
	defer c.Close()
	io.Copy(c, c)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}
