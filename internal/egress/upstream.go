package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// UpstreamFunc names the proxy a connection to host:port goes through
// (nil: none, dial it directly), as this machine's own tools reach the
// network (HTTPS_PROXY, HTTP_PROXY, NO_PROXY). scheme is "https" for a
// CONNECT tunnel and "http" for a forwarded request.
type UpstreamFunc func(scheme, host string, port int) (*url.URL, error)

// Upstream is how an admitted connection leaves: through the proxy Func
// names (nil: directly), an https:// one checked against Roots (nil: the
// system's certificate authorities).
type Upstream struct {
	Func  UpstreamFunc
	Roots *x509.CertPool
}

// dialVia connects to t through the proxy px, with px's credentials, if
// any, as Basic Proxy-Authorization: for a tunnel (scheme "https"), a
// CONNECT to the name (the policy has already admitted it and every
// address it resolves to here); for a forwarded request (scheme "http"),
// the connection to the proxy itself, which the request is then written
// to in absolute form (target.via), as a proxy's clients do: proxies
// commonly refuse CONNECT to port 80. An http:// proxy is spoken to in
// the clear, an https:// one over TLS (checked against UpstreamRoots).
func (p *Proxy) dialVia(ctx context.Context, px *url.URL, t *target, scheme string) (net.Conn, error) {
	port := map[string]string{"": "80", "http": "80", "https": "443"}[px.Scheme]
	if port == "" {
		return nil, fmt.Errorf("this machine's proxy %s is neither an http:// nor an https:// proxy, the kinds the egress proxy goes through", redactProxy(px))
	}
	addr := px.Host
	if px.Port() == "" {
		addr = net.JoinHostPort(px.Hostname(), port)
	}
	u, err := p.opts.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("this machine's proxy %s: %w", redactProxy(px), err)
	}
	if px.Scheme == "https" {
		tc := tls.Client(u, &tls.Config{ServerName: px.Hostname(), RootCAs: p.opts.UpstreamRoots, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			u.Close()
			return nil, fmt.Errorf("this machine's proxy %s: TLS: %w", redactProxy(px), err)
		}
		u = tc
	}
	if !p.track(u, false) {
		u.Close()
		return nil, ErrStopped
	}
	auth := ""
	if px.User != nil {
		pw, _ := px.User.Password()
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(px.User.Username()+":"+pw))
	}
	t.rec.Via = redactProxy(px)
	if scheme == "http" {
		t.via = &via{auth: auth}
		return u, nil
	}
	target := net.JoinHostPort(t.rec.Host, strconv.Itoa(t.rec.Port))
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: " + auth + "\r\n"
	}
	if dl, ok := ctx.Deadline(); ok {
		u.SetDeadline(dl)
	}
	fail := func(err error) (net.Conn, error) {
		p.untrack(u)
		return nil, err
	}
	if _, err := io.WriteString(u, req+"\r\n"); err != nil {
		return fail(fmt.Errorf("this machine's proxy %s: %w", redactProxy(px), err))
	}
	br := bufio.NewReaderSize(u, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fail(fmt.Errorf("this machine's proxy %s: %w", redactProxy(px), err))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("this machine's proxy %s answered %s to CONNECT %s", redactProxy(px), resp.Status, target))
	}
	u.SetDeadline(time.Time{})
	if br.Buffered() > 0 { // the far end spoke first, within the proxy's answer
		bc := &bufferedConn{Conn: u, r: br}
		p.mu.Lock() // the caller untracks what it is given
		delete(p.conns, u)
		p.conns[bc] = struct{}{}
		p.mu.Unlock()
		return bc, nil
	}
	return u, nil
}

// via is a forwarded request's way through this machine's proxy: the
// request goes to the proxy in absolute form, with auth as its
// Proxy-Authorization ("" for none).
type via struct{ auth string }

// redactProxy is the proxy's URL without its credentials.
func redactProxy(px *url.URL) string {
	c := *px
	c.User = nil
	return c.String()
}

// bufferedConn reads what was buffered before the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
