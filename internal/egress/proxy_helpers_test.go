package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder collects OnRecord calls.
type recorder struct {
	mu   sync.Mutex
	recs []Record
	ch   chan Record
}

func newRecorder() *recorder { return &recorder{ch: make(chan Record, 1000)} }

func (r *recorder) add(rec Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	r.ch <- rec
}

func (r *recorder) next(t *testing.T) Record {
	t.Helper()
	select {
	case rec := <-r.ch:
		return rec
	case <-time.After(5 * time.Second):
		t.Fatal("no record within 5s")
		return Record{}
	}
}

func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case rec := <-r.ch:
		t.Fatalf("unexpected record %+v", rec)
	default:
	}
}

// testProxy is a Proxy on a real unix socket with an injected resolver
// (a fixed table) and a dial hook that remembers every address dialed.
type testProxy struct {
	*Proxy
	sock     string
	rec      *recorder
	resolves atomic.Int32
	mu       sync.Mutex
	dialed   []string
}

func (tp *testProxy) dialedAddrs() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.dialed...)
}

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "egress")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newTestProxy(t *testing.T, entries []string, dns map[string][]string, mod func(*ProxyOptions)) *testProxy {
	t.Helper()
	al, err := NewAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{sock: filepath.Join(shortTempDir(t), "egress.sock"), rec: newRecorder()}
	opts := ProxyOptions{
		Socket:   tp.sock,
		Policy:   al,
		OnRecord: tp.rec.add,
		Resolver: func(ctx context.Context, host string) ([]net.IP, error) {
			tp.resolves.Add(1)
			addrs, ok := dns[host]
			if !ok {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			var out []net.IP
			for _, a := range addrs {
				out = append(out, net.ParseIP(a))
			}
			return out, nil
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			tp.mu.Lock()
			tp.dialed = append(tp.dialed, addr)
			tp.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	if mod != nil {
		mod(&opts)
	}
	tp.Proxy = NewProxy(opts)
	if err := tp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return tp
}

func (tp *testProxy) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", tp.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// connect sends CONNECT target and reads the proxy's answer.
func (tp *testProxy) connect(t *testing.T, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c := tp.dial(t)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, resp
}

// client is an HTTP client that uses the proxy for every URL.
func (tp *testProxy) client(tr *http.Transport) *http.Client {
	if tr == nil {
		tr = &http.Transport{}
	}
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.proxy"})
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", tp.sock)
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func portOf(t *testing.T, rawURL string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
