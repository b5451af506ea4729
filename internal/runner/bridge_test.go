package runner

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func echoThrough(t *testing.T, addr string, payload []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, payload) {
		t.Errorf("echo through the bridge: %d bytes, %v; want %d", len(got), err, len(payload))
	}
}

func TestBridgeRelays(t *testing.T) {
	b, err := ListenBridge("127.0.0.1:0", testsupport.EchoUnix(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve() }()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			echoThrough(t, b.Addr().String(), bytes.Repeat([]byte{byte(i)}, 1<<20+i))
		}()
	}
	wg.Wait()
	// Close cuts a relayed connection that is still open.
	c, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Fatal("relayed connection survived Close")
	}
}

func TestBridgeTargetDown(t *testing.T) {
	b, err := ListenBridge("127.0.0.1:0", filepath.Join(testsupport.ShortDir(t), "none"))
	if err != nil {
		t.Fatal(err)
	}
	go b.Serve()
	defer b.Close()
	c, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read %d, %v; want EOF", n, err)
	}
}

func TestServeStartsBridge(t *testing.T) {
	// A free port: listen, note it, release it for Serve.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ready := make(chan struct{})
	testServer(t, t.TempDir(), ServerOptions{ProxySocket: testsupport.EchoUnix(t, ""), ProxyListen: addr, Ready: func() { close(ready) }})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	echoThrough(t, addr, []byte("GET http://example.test/ HTTP/1.1\r\n\r\n"))
}

func TestServeBridgeListenFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ln, err := net.Listen("unix", filepath.Join(testsupport.ShortDir(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(context.Background(), ln, ServerOptions{Root: t.TempDir(), ProxySocket: "/nonexistent", ProxyListen: l.Addr().String()})
	if err == nil {
		t.Fatal("serve with a taken bridge address succeeded")
	}
}

// TestServeForwardsNeedProxy: a forward without the egress proxy's socket
// is refused at the start, not left to fail each connection.
func TestServeForwardsNeedProxy(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(testsupport.ShortDir(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(context.Background(), ln, ServerOptions{Root: t.TempDir(), Forwards: []string{"127.0.0.1:4873"}})
	if err == nil || !strings.Contains(err.Error(), "egress proxy") {
		t.Fatalf("serve with forwards and no proxy socket: %v, want the error that names the proxy", err)
	}
}

// TestTunnelBridge: a tunnel's listener asks the proxy for a tunnel to
// its own address first; once the proxy answers 200, bytes flow both
// ways (what the proxy's answer already carried included), and a
// connection the proxy refuses is closed without a byte.
func TestTunnelBridge(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	allowed := ""
	asked := testsupport.TunnelProxy(t, ln, func(target string) bool {
		mu.Lock()
		defer mu.Unlock()
		return target == allowed
	}, "hello ")
	// Each tunnel listens on a free port of this loopback and asks for
	// that address.
	open := func() *Bridge {
		b, err := ListenTunnel("127.0.0.1:0", sock)
		if err != nil {
			t.Fatal(err)
		}
		b.connect = b.Addr().String()
		go b.Serve()
		t.Cleanup(func() { b.Close() })
		return b
	}
	ok, refused := open(), open()
	mu.Lock()
	allowed = ok.Addr().String()
	mu.Unlock()

	c, err := net.Dial("tcp", ok.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "world")
	c.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(c); err != nil || string(got) != "hello world" {
		t.Fatalf("through the tunnel: %q %v", got, err)
	}
	c.Close()

	c, err = net.Dial("tcp", refused.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("a refused tunnel: %q %v", got, err)
	}
	c.Close()
	want := []string{"CONNECT " + ok.Addr().String(), "CONNECT " + refused.Addr().String()}
	if got := asked(); !slices.Equal(got, want) {
		t.Fatalf("the proxy was asked for %v, want %v", got, want)
	}
}

// A proxy's answer to CONNECT: any 2xx opens the tunnel, and what follows
// its header stays for the tunnel; anything else is an error naming the
// proxy's status, and an answer that is not HTTP, ends early or has no
// end is refused.
func TestReadConnectAnswer(t *testing.T) {
	for _, c := range []struct {
		answer, rest, err string
	}{
		{"HTTP/1.1 200 Connection established\r\n\r\nhello", "hello", ""},
		{"HTTP/1.0 200 OK\r\nProxy-Agent: x\r\nVia: 1.1 p\r\n\r\nfirst bytes", "first bytes", ""},
		{"HTTP/1.1 204\n\n", "", ""},
		{"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden", "", "403 Forbidden"},
		{"HTTP/1.1 502 Bad Gateway\r\n\r\n", "", "502 Bad Gateway"},
		{"SSH-2.0-OpenSSH\r\n\r\n", "", "not HTTP"},
		{"HTTP/1.1 2000 OK\r\n\r\n", "", "not HTTP"},
		{"HTTP/1.1 200 OK\r\nVia: p\r\n", "", "unexpected EOF"},
		{"HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", maxAnswerHeaders+1) + "\r\n", "", "header lines"},
		{"HTTP/1.1 200 " + strings.Repeat("x", maxAnswerLine+1) + "\r\n\r\n", "", "over 8192 bytes"},
	} {
		br := bufio.NewReaderSize(strings.NewReader(c.answer), 16)
		err := readConnectAnswer(br)
		if c.err == "" {
			rest, _ := io.ReadAll(br)
			if err != nil || string(rest) != c.rest {
				t.Errorf("%q: %v, then %q", c.answer, err, rest)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want an error with %q", c.answer, err, c.err)
		}
	}
}
