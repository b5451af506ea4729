package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProxyOptions configure a Proxy. Only Policy is required.
type ProxyOptions struct {
	// Socket is the unix socket path Start listens on ("" to serve only
	// listeners given to Serve). A stale socket file there is replaced.
	Socket string
	// SocketMode is the socket file's permission (default 0600).
	SocketMode os.FileMode
	// Policy decides every connection (nil denies everything).
	Policy Policy
	// Resolver resolves a host name (default net.DefaultResolver). It is
	// called once per connection, only for names the policy's NameChecker
	// (if any) admits; the proxy dials only the addresses it returned.
	Resolver func(ctx context.Context, host string) ([]net.IP, error)
	// Dial connects to an upstream "ip:port" (default net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Upstream, when set, names the proxy of this machine a connection
	// goes through once the policy has admitted it (dialVia); nil, or a
	// nil URL, dials the checked addresses directly.
	Upstream UpstreamFunc
	// UpstreamRoots are the certificate authorities an https:// proxy
	// that Upstream names is checked against (nil: the system's).
	UpstreamRoots *x509.CertPool
	// OnRecord receives one Record per CONNECT tunnel and per forwarded
	// HTTP request, when it ends, with its byte counts; also one for every
	// denial. It may be called concurrently; Stop returns only after the
	// last call.
	OnRecord func(Record)
	// IdleTimeout closes a tunnel or a kept-alive connection after this
	// long without a byte in either direction (default 5m).
	IdleTimeout time.Duration
	// HeaderTimeout bounds the time a client takes to send a request's
	// headers (default 10s).
	HeaderTimeout time.Duration
	// DialTimeout bounds resolving and connecting to the upstream
	// (default 15s).
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds an upstream's time to the first byte of
	// its response headers for forwarded HTTP (default 60s).
	ResponseHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (default 64 KiB).
	// An upstream's response headers are bounded to 16 times as much.
	MaxHeaderBytes int
	// MaxConns bounds the client connections served at once (default
	// 512); a connection beyond it gets 503 and is closed.
	MaxConns int
}

// Default timeouts and limits.
const (
	DefaultIdleTimeout           = 5 * time.Minute
	DefaultHeaderTimeout         = 10 * time.Second
	DefaultDialTimeout           = 15 * time.Second
	DefaultResponseHeaderTimeout = 60 * time.Second
	DefaultMaxHeaderBytes        = 64 << 10
	DefaultMaxConns              = 512
)

// ErrStopped is returned by Start and Serve after Stop.
var ErrStopped = errors.New("egress proxy stopped")

// Proxy is the host-side egress proxy: HTTP CONNECT and absolute-URI HTTP
// on a unix socket (and any listener given to Serve). Every connection is
// resolved once on the host, decided by the Policy, and dialed to the
// checked address itself, so a second resolution cannot move it (no DNS
// rebinding); behind this machine's proxy (Upstream), the admitted name
// goes to that proxy, and a name that does not resolve here is left to
// it to resolve. Denials get 403 with header X-Agentrun-Deny and a one-line
// body; a name that does not resolve or an upstream that fails gets 502
// (504 on a timeout) with header X-Agentrun-Error; anything but CONNECT or
// an absolute http:// URI gets 400, oversized headers 431, a connection
// beyond MaxConns 503.
type Proxy struct {
	opts   ProxyOptions
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc

	mu        sync.Mutex
	started   bool
	stopped   bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	clients   int // client connections being served
	wg        sync.WaitGroup
}

// NewProxy makes a Proxy; it does nothing until Start or Serve.
func NewProxy(opts ProxyOptions) *Proxy {
	if opts.Policy == nil {
		opts.Policy = &Allowlist{} // fail closed: deny everything
	}
	if opts.SocketMode == 0 {
		opts.SocketMode = 0o600
	}
	if opts.Resolver == nil {
		opts.Resolver = func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		}
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: opts.DialTimeout}
		opts.Dial = d.DialContext
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.ResponseHeaderTimeout <= 0 {
		opts.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		opts:      opts,
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[net.Listener]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
}

// Start listens on opts.Socket (if set) and serves it in the background.
// A second Start is a no-op; Start after Stop returns ErrStopped. The
// socket's directory should be private to the user: the socket is
// chmod'ed to SocketMode only after it is created.
func (p *Proxy) Start(ctx context.Context) (err error) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return ErrStopped
	}
	if p.started {
		p.mu.Unlock()
		return nil
	}
	p.started = true
	p.mu.Unlock()
	defer func() {
		if err != nil {
			p.mu.Lock()
			p.started = false
			p.mu.Unlock()
		}
	}()
	if p.opts.Socket == "" {
		return nil
	}
	if fi, err := os.Lstat(p.opts.Socket); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("egress proxy socket %s: exists and is not a socket", p.opts.Socket)
		}
		if err := os.Remove(p.opts.Socket); err != nil {
			return fmt.Errorf("remove stale egress proxy socket: %w", err)
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", p.opts.Socket)
	if err != nil {
		return fmt.Errorf("listen on egress proxy socket: %w", err)
	}
	if err := os.Chmod(p.opts.Socket, p.opts.SocketMode); err != nil {
		ln.Close()
		return fmt.Errorf("chmod egress proxy socket: %w", err)
	}
	if !p.addListener(ln) {
		return ErrStopped
	}
	go p.serve(ln)
	return nil
}

// Serve accepts connections on ln until Stop (then it returns nil) or an
// accept error. The Proxy owns ln from here on and closes it.
func (p *Proxy) Serve(ln net.Listener) error {
	if !p.addListener(ln) {
		return ErrStopped
	}
	return p.serve(ln)
}

// Stop closes the listeners and every open connection and tunnel, then
// waits for the handlers (and their OnRecord calls) to finish or ctx to
// end. A second Stop, or a Stop before Start, is fine.
func (p *Proxy) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		p.cancel()
		for ln := range p.listeners {
			ln.Close()
		}
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop egress proxy: %w", ctx.Err())
	}
}

// addListener registers ln and one wg slot for its serve loop.
func (p *Proxy) addListener(ln net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		ln.Close()
		return false
	}
	p.listeners[ln] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) serve(ln net.Listener) error {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.isStopped() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("egress proxy accept: %w", err)
		}
		backoff = 0
		if !p.track(c, true) {
			c.Close()
			continue
		}
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			if !p.acquire() {
				writeStatus(c, http.StatusServiceUnavailable, "", "too many connections through the egress proxy")
				lingerClose(c)
				return
			}
			p.handle(c)
			p.release()
			lingerClose(c)
		}()
	}
}

// acquire counts a client connection, or reports false at MaxConns.
func (p *Proxy) acquire() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clients >= p.opts.MaxConns {
		return false
	}
	p.clients++
	return true
}

func (p *Proxy) release() {
	p.mu.Lock()
	p.clients--
	p.mu.Unlock()
}

// lingerClose half-closes c and reads what the client still sends for a
// moment, so that a final response is not lost to a reset when the client
// had sent more than was read (a pipelined request or body).
func lingerClose(c net.Conn) {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	io.CopyN(io.Discard, c, 1<<20)
}

func (p *Proxy) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// track registers c so that Stop closes it; with handler it also takes a
// wg slot. It returns false (and c stays unregistered) after Stop.
func (p *Proxy) track(c net.Conn, handler bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.conns[c] = struct{}{}
	if handler {
		p.wg.Add(1)
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) emit(r Record) {
	if p.opts.OnRecord != nil {
		p.opts.OnRecord(r)
	}
}

// handle serves one client connection: requests until a CONNECT, a close,
// an error or the idle timeout.
func (p *Proxy) handle(c net.Conn) {
	lim := &limitReader{r: c}
	br := bufio.NewReaderSize(lim, 4<<10)
	wait := p.opts.HeaderTimeout
	for {
		// Wait for the first byte of a request (idle between requests),
		// then give the client HeaderTimeout to finish the headers.
		lim.n, lim.exceeded = int64(p.opts.MaxHeaderBytes), false
		c.SetReadDeadline(time.Now().Add(wait))
		if _, err := br.Peek(1); err != nil {
			return
		}
		c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
		req, err := http.ReadRequest(br)
		if err != nil {
			if lim.exceeded {
				writeStatus(c, http.StatusRequestHeaderFieldsTooLarge, "", "request headers too large")
			} else if !isTimeout(err) {
				writeStatus(c, http.StatusBadRequest, "", "malformed request")
			}
			return
		}
		lim.n = -1
		c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			p.connect(c, br, req)
			return
		}
		if !p.forward(c, br, req) {
			return
		}
		wait = p.opts.IdleTimeout
	}
}

// target is one decided destination.
type target struct {
	rec Record
	ips []net.IP
	px  *url.URL // this machine's proxy when the name resolves only there
	via *via     // a forwarded request's way through this machine's proxy
}

// ResolveBesideProxyTimeout bounds resolving a name on this machine when
// this machine's proxy will carry the connection: past it, the name is
// left to the proxy to resolve, as an unknown one is.
const ResolveBesideProxyTimeout = 3 * time.Second

// upstream is the proxy of this machine a connection to host:port for
// scheme goes through (nil: none).
func (p *Proxy) upstream(scheme, host string, port int) (*url.URL, error) {
	if p.opts.Upstream == nil {
		return nil, nil
	}
	return p.opts.Upstream(scheme, host, port)
}

// decide resolves (once) and decides host:port, for a tunnel (scheme
// "https") or a forwarded request ("http"). On denial it has already
// answered the client and emitted the record.
func (p *Proxy) decide(c net.Conn, method, scheme, rawHost string, port int) (*target, bool) {
	rec := Record{Host: clip(strings.ToLower(rawHost)), Port: port, Method: method}
	h, addr, err := normalizeHost(rawHost)
	if err != nil {
		rec.Why, rec.Code = err.Error(), CodeBadHost
		p.deny(c, rec, http.StatusForbidden)
		return nil, false
	}
	rec.Host = h
	var ips []net.IP
	if addr.IsValid() {
		ips = []net.IP{addr.AsSlice()}
	} else {
		var byName Decision
		if nc, ok := p.opts.Policy.(NameChecker); ok {
			if byName = nc.CheckName(p.ctx, h, port); !byName.Allow {
				p.deny(c, fill(rec, byName), http.StatusForbidden)
				return nil, false
			}
		}
		px, _ := p.upstream(scheme, h, port) // an error is dial's to report
		wait := p.opts.DialTimeout
		if px != nil {
			wait = min(wait, ResolveBesideProxyTimeout)
		}
		ctx, cancel := context.WithTimeout(p.ctx, wait)
		ips, err = p.opts.Resolver(ctx, h)
		cancel()
		if err == nil && len(ips) == 0 {
			err = errors.New("no addresses")
		}
		if err != nil && px != nil && byName.Allow {
			// Behind a company proxy, this machine's DNS often knows only
			// the company's own names, and the proxy resolves the rest,
			// as it does for the user's own tools. The name is admitted;
			// there are no addresses here to check.
			rec = fill(rec, byName)
			rec.Why += fmt.Sprintf("; %s does not resolve here (%v), the proxy %s resolves it", h, err, redactProxy(px))
			return &target{rec: rec, px: px}, true
		}
		if err != nil {
			rec.Why, rec.Code = fmt.Sprintf("cannot resolve %s: %v", h, err), CodeResolve
			p.deny(c, rec, http.StatusBadGateway)
			return nil, false
		}
	}
	d := p.opts.Policy.Decide(p.ctx, Request{Host: h, Port: port, IPs: ips})
	rec = fill(rec, d)
	if !d.Allow {
		p.deny(c, rec, http.StatusForbidden)
		return nil, false
	}
	return &target{rec: rec, ips: ips}, true
}

func fill(r Record, d Decision) Record {
	r.Allow, r.Why, r.Rule, r.Code = d.Allow, d.Why, d.Rule, d.Code
	if d.IP != "" {
		r.IP = d.IP
	}
	return r
}

// deny answers a denied request and emits its record.
func (p *Proxy) deny(c net.Conn, rec Record, status int) {
	rec.Allow = false
	msg := fmt.Sprintf("agentrun egress: %s %s denied: %s", rec.Method, hostPort(rec.Host, rec.Port), rec.Why)
	hdr := "X-Agentrun-Deny"
	if status != http.StatusForbidden {
		hdr = "X-Agentrun-Error"
	}
	writeStatus(c, status, hdr+": "+oneLine(rec.Why), msg)
	p.emit(rec)
}

// dial connects to the first reachable checked address, or through this
// machine's proxy for scheme ("https" for a tunnel, "http" for a
// forwarded request) when Upstream names one.
func (p *Proxy) dial(t *target, scheme string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.DialTimeout)
	defer cancel()
	px := t.px
	if px == nil {
		var err error
		if px, err = p.upstream(scheme, t.rec.Host, t.rec.Port); err != nil {
			return nil, err
		}
	}
	if px != nil {
		return p.dialVia(ctx, px, t, scheme)
	}
	var firstErr error
	for _, ip := range t.ips {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(t.rec.Port))
		u, err := p.opts.Dial(ctx, "tcp", addr)
		if err == nil {
			if !p.track(u, false) {
				u.Close()
				return nil, ErrStopped
			}
			t.rec.IP = ip.String()
			return u, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// upstreamFailed answers 502 (or 504 for a timeout) for an allowed
// connection whose upstream failed before any response, and emits it.
func (p *Proxy) upstreamFailed(c net.Conn, rec Record, err error) {
	rec.Code, rec.Error = CodeUpstream, err.Error()
	status := http.StatusBadGateway
	if isTimeout(err) {
		status = http.StatusGatewayTimeout
	}
	msg := fmt.Sprintf("agentrun egress: %s %s: upstream failed: %v", rec.Method, hostPort(rec.Host, rec.Port), err)
	writeStatus(c, status, "X-Agentrun-Error: "+oneLine(err.Error()), msg)
	p.emit(rec)
}

// connect serves CONNECT host:port: decide, dial, 200, splice.
func (p *Proxy) connect(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, portStr, err := net.SplitHostPort(req.URL.Host)
	port, perr := parsePort(portStr)
	if err != nil || perr != nil || req.URL.Path != "" || host == "" {
		writeStatus(c, http.StatusBadRequest, "", "CONNECT needs host:port")
		return
	}
	t, ok := p.decide(c, http.MethodConnect, "https", host, port)
	if !ok {
		return
	}
	u, err := p.dial(t, "https")
	if err != nil {
		p.upstreamFailed(c, t.rec, err)
		return
	}
	defer p.untrack(u)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		t.rec.Error = "write to client: " + err.Error()
		p.emit(t.rec)
		return
	}
	up, dn, err := splice(c, br, u, p.opts.IdleTimeout)
	t.rec.BytesUp, t.rec.BytesDn = up, dn
	if err != nil && !p.isStopped() {
		t.rec.Error = err.Error()
	}
	p.emit(t.rec)
}

// writeStatus writes a complete short response and asks the client to
// close. header is one extra "Name: value" line or "".
func writeStatus(c net.Conn, status int, header, body string) {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	if header != "" {
		b.WriteString(header + "\r\n")
	}
	body = oneLine(body) + "\n"
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, b.String())
}

// oneLine makes s safe as a header value and a one-line body.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// limitReader fails reads once n bytes are used (n < 0: no limit).
type limitReader struct {
	r        io.Reader
	n        int64
	exceeded bool
}

var errHeaderTooLarge = errors.New("request headers too large")

func (l *limitReader) Read(b []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(b)
	}
	if l.n == 0 {
		l.exceeded = true
		return 0, errHeaderTooLarge
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}
