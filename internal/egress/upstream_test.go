package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// public is where the test's names resolve: a public address, never
// dialled (every connection goes through the machine's proxy).
const public = "93.184.216.34"

// viaProxy is a test proxy whose Upstream is the forward proxy px for
// every scheme.
func viaProxy(t *testing.T, entries []string, dns map[string][]string, px *testsupport.ForwardProxy, user *url.Userinfo) *testProxy {
	u, err := url.Parse(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = user
	return newTestProxy(t, entries, dns, func(o *ProxyOptions) {
		o.Upstream = func(scheme, host string, port int) (*url.URL, error) { return u, nil }
	})
}

// pingThrough tunnels to target (an echo server behind the proxy) and
// sends a ping through, and returns the tunnel's record.
func pingThrough(t *testing.T, tp *testProxy, target string) Record {
	t.Helper()
	c, br, resp := tp.connect(t, target)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("through the tunnel to %s: %q %v", target, buf, err)
	}
	c.Close()
	return tp.rec.next(t)
}

// originServer answers "from the origin PATH".
func originServer(t *testing.T) *httptest.Server {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the origin "+r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	return origin
}

// TestUpstreamTunnel: behind this machine's proxy, an allowed CONNECT is
// tunnelled through it, by name, with the proxy's credentials; the
// checked address is never dialled, and the record names the proxy
// without its password.
func TestUpstreamTunnel(t *testing.T) {
	echo := testsupport.EchoTCP(t)
	px := testsupport.NewForwardProxy(t, map[string]string{"pkg.example.com:443": "127.0.0.1:" + strconv.Itoa(echo)})
	px.Auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	tp := viaProxy(t, []string{"pkg.example.com"}, map[string][]string{"pkg.example.com": {public}}, px, url.UserPassword("alice", "s3cret"))
	rec := pingThrough(t, tp, "pkg.example.com:443")
	if !rec.Allow || rec.Via != px.URL || strings.Contains(fmt.Sprint(rec), "s3cret") {
		t.Fatalf("record %+v", rec)
	}
	if got := px.Targets(); !slices.Equal(got, []string{"pkg.example.com:443"}) {
		t.Fatalf("the proxy was asked for %v", got)
	}
	if slices.ContainsFunc(tp.dialedAddrs(), func(a string) bool { return strings.HasPrefix(a, public) }) {
		t.Fatalf("the checked address was dialled directly: %v", tp.dialedAddrs())
	}
}

// TestUpstreamForward: a forwarded http:// request goes to this machine's
// proxy in absolute form (proxies commonly refuse CONNECT to port 80),
// with its credentials, never the sandbox's own Proxy-Authorization.
func TestUpstreamForward(t *testing.T) {
	var got http.Header
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		io.WriteString(w, "from the origin "+r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	px := testsupport.NewForwardProxy(t, map[string]string{"pkg.example.com:80": origin.Listener.Addr().String()})
	px.Auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	tp := viaProxy(t, []string{"pkg.example.com:80"}, map[string][]string{"pkg.example.com": {public}}, px, url.UserPassword("alice", "s3cret"))
	req, _ := http.NewRequest(http.MethodGet, "http://pkg.example.com/simple/", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2FuZGJveA==") // the sandbox's: never passed on
	resp, err := tp.client(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || body != "from the origin /simple/" {
		t.Fatalf("%s: %q", resp.Status, body)
	}
	if got.Get("Proxy-Authorization") != "" {
		t.Fatalf("the origin got a Proxy-Authorization: %v", got)
	}
	if rec := tp.rec.next(t); !rec.Allow || rec.Via != px.URL {
		t.Fatalf("record %+v", rec)
	}
	if got := px.Targets(); !slices.Equal(got, []string{"pkg.example.com:80"}) {
		t.Fatalf("the proxy was asked for %v", got)
	}
}

// TestUpstreamKeepsThePolicy: this machine's proxy changes only how an
// admitted connection is made. A name the allowlist does not list, and
// an allowed name that resolves to this machine's loopback, are refused
// as before, and the proxy never hears of them; a proxy that refuses
// (407) is an upstream failure naming it, without its password.
func TestUpstreamKeepsThePolicy(t *testing.T) {
	px := testsupport.NewForwardProxy(t, nil)
	px.Auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:right"))
	dns := map[string][]string{"pkg.example.com": {public}, "evil.example.com": {public}, "rebind.example.com": {"127.0.0.1"}}
	tp := viaProxy(t, []string{"pkg.example.com", "rebind.example.com"}, dns, px, url.UserPassword("alice", "wrong-pass"))
	for _, target := range []string{"evil.example.com:443", "rebind.example.com:443"} {
		_, _, resp := tp.connect(t, target)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT %s: %s", target, resp.Status)
		}
		if rec := tp.rec.next(t); rec.Allow || rec.Via != "" {
			t.Fatalf("CONNECT %s: record %+v", target, rec)
		}
	}
	if got := px.Targets(); len(got) != 0 {
		t.Fatalf("the proxy was asked for %v", got)
	}
	_, _, resp := tp.connect(t, "pkg.example.com:443")
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("CONNECT through a proxy that refuses: %s", resp.Status)
	}
	rec := tp.rec.next(t)
	if rec.Code != CodeUpstream || !strings.Contains(rec.Error, "answered 407") || strings.Contains(fmt.Sprint(rec), "wrong-pass") {
		t.Fatalf("record %+v", rec)
	}
}

// TestUpstreamResolvesNames: behind this machine's proxy, where this
// machine's DNS knows only its network's own names (or does not answer),
// an allowed name that does not resolve here is left to the proxy to
// resolve, as the user's own tools do: a tunnel and a forwarded request
// go through by name, and the record says why. A name the allowlist does
// not admit is still refused before any lookup, and without a proxy an
// unresolved name is still a resolve failure.
func TestUpstreamResolvesNames(t *testing.T) {
	echo := testsupport.EchoTCP(t)
	origin := originServer(t)
	px := testsupport.NewForwardProxy(t, map[string]string{
		"pkg.corp.example:443":  "127.0.0.1:" + strconv.Itoa(echo),
		"slow.corp.example:443": "127.0.0.1:" + strconv.Itoa(echo),
		"pkg.corp.example:80":   origin.Listener.Addr().String(),
	})
	u, _ := url.Parse(px.URL)
	tp := newTestProxy(t, []string{"pkg.corp.example:80", "pkg.corp.example:443", "slow.corp.example"}, nil, func(o *ProxyOptions) {
		o.Upstream = func(scheme, host string, port int) (*url.URL, error) { return u, nil }
		o.DialTimeout = 300 * time.Millisecond
		next := o.Resolver
		o.Resolver = func(ctx context.Context, host string) ([]net.IP, error) {
			if host == "slow.corp.example" { // a DNS server that does not answer
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return next(ctx, host)
		}
	})
	for _, target := range []string{"pkg.corp.example:443", "slow.corp.example:443"} {
		rec := pingThrough(t, tp, target)
		if !rec.Allow || rec.Code != CodeAllowed || rec.Via != px.URL || rec.IP != "" ||
			!strings.Contains(rec.Why, "does not resolve here") || !strings.Contains(rec.Why, "the proxy "+px.URL+" resolves it") {
			t.Fatalf("CONNECT %s: record %+v", target, rec)
		}
	}
	resp, err := tp.client(nil).Get("http://pkg.corp.example/simple/")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK || body != "from the origin /simple/" {
		t.Fatalf("%s: %q", resp.Status, body)
	}
	if rec := tp.rec.next(t); !rec.Allow || rec.Via != px.URL {
		t.Fatalf("record %+v", rec)
	}
	resolves := tp.resolves.Load()
	if _, _, resp := tp.connect(t, "other.corp.example:443"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT to a name not listed: %s", resp.Status)
	}
	if rec := tp.rec.next(t); rec.Allow || rec.Code != CodeNotListed || tp.resolves.Load() != resolves {
		t.Fatalf("a name not listed: record %+v, looked up: %v", rec, tp.resolves.Load() != resolves)
	}
	want := []string{"pkg.corp.example:443", "slow.corp.example:443", "pkg.corp.example:80"}
	if got := px.Targets(); !slices.Equal(got, want) {
		t.Fatalf("the proxy was asked for %v, want %v", got, want)
	}

	direct := newTestProxy(t, []string{"pkg.corp.example"}, nil, nil)
	if _, _, resp := direct.connect(t, "pkg.corp.example:443"); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("CONNECT to a name that does not resolve, without a proxy: %s", resp.Status)
	}
	if rec := direct.rec.next(t); rec.Allow || rec.Code != CodeResolve {
		t.Fatalf("without a proxy: record %+v", rec)
	}
}

// TestUpstreamTLSProxy: an https:// proxy of this machine is spoken to
// over TLS, its certificate checked against the user's certificate
// authorities: a tunnel and a forwarded request go through it; a proxy
// whose certificate no trusted authority signed is an upstream failure
// that says so, and nothing is sent to it in the clear.
func TestUpstreamTLSProxy(t *testing.T) {
	echo := testsupport.EchoTCP(t)
	origin := originServer(t)
	ca := testsupport.NewPrivateCA(t)
	px := testsupport.NewTLSForwardProxy(t, map[string]string{
		"pkg.example.com:443": "127.0.0.1:" + strconv.Itoa(echo), "pkg.example.com:80": origin.Listener.Addr().String()}, ca)
	u, _ := url.Parse(px.URL)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CAPEM)
	dns := map[string][]string{"pkg.example.com": {public}}
	proxyWith := func(roots *x509.CertPool) *testProxy {
		return newTestProxy(t, []string{"pkg.example.com:443", "pkg.example.com:80"}, dns, func(o *ProxyOptions) {
			o.Upstream = func(scheme, host string, port int) (*url.URL, error) { return u, nil }
			o.UpstreamRoots = roots
		})
	}
	tp := proxyWith(roots)
	if rec := pingThrough(t, tp, "pkg.example.com:443"); !rec.Allow || rec.Via != px.URL {
		t.Fatalf("record %+v", rec)
	}
	resp2, err := tp.client(nil).Get("http://pkg.example.com/simple/")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp2); resp2.StatusCode != http.StatusOK || body != "from the origin /simple/" {
		t.Fatalf("%s: %q", resp2.Status, body)
	}
	if rec := tp.rec.next(t); !rec.Allow || rec.Via != px.URL {
		t.Fatalf("record %+v", rec)
	}
	if got := px.Targets(); !slices.Equal(got, []string{"pkg.example.com:443", "pkg.example.com:80"}) {
		t.Fatalf("the proxy was asked for %v", got)
	}

	untrusting := proxyWith(nil) // the system's authorities alone
	if _, _, resp := untrusting.connect(t, "pkg.example.com:443"); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("CONNECT through a proxy whose certificate is not trusted: %s", resp.Status)
	}
	if rec := untrusting.rec.next(t); rec.Code != CodeUpstream || !strings.Contains(rec.Error, "TLS") || !strings.Contains(rec.Error, "certificate") {
		t.Fatalf("record %+v", rec)
	}
	if got := px.Targets(); len(got) != 2 {
		t.Fatalf("the untrusted proxy was asked for %v", got[2:])
	}
}

// TestUpstreamBanner: a far end that speaks first (its bytes arrive with
// the proxy's answer) is read from the start, and its connection is
// let go of when the tunnel ends.
func TestUpstreamBanner(t *testing.T) {
	addr := testsupport.ServeTCP(t, func(c net.Conn) {
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-banner\r\n")
		io.Copy(io.Discard, c)
	})
	px := &url.URL{Scheme: "http", Host: addr}
	tp := newTestProxy(t, []string{"git.example.com:22"}, map[string][]string{"git.example.com": {public}}, func(o *ProxyOptions) {
		o.Upstream = func(string, string, int) (*url.URL, error) { return px, nil }
	})
	c, br, resp := tp.connect(t, "git.example.com:22")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "SSH-2.0-banner\r\n" {
		t.Fatalf("banner %q %v", line, err)
	}
	c.Close()
	if rec := tp.rec.next(t); !rec.Allow || rec.Via == "" {
		t.Fatalf("record %+v", rec)
	}
	// The record comes before the tunnel's connections are let go of.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tp.Proxy.mu.Lock()
		n := len(tp.Proxy.conns)
		tp.Proxy.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still tracked 5 s after the tunnel ended", n)
		}
	}
}
