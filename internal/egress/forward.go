package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// hopHeaders are removed in both directions, with every header the
// Connection header names and every Proxy-* header.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func stripHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// forward serves one absolute-URI HTTP request: decide, dial the checked
// address, send the request in origin form (hop-by-hop and Proxy-*
// headers stripped, Connection: close upstream), stream the response
// back. It reports whether the client connection may serve another
// request.
func (p *Proxy) forward(c net.Conn, br *bufio.Reader, req *http.Request) bool {
	host, port, ok := absoluteTarget(c, req)
	if !ok {
		return false
	}
	t, ok := p.decide(c, req.Method, "http", host, port)
	if !ok {
		return false
	}
	u, err := p.dial(t, "http")
	if err != nil {
		p.upstreamFailed(c, t.rec, err)
		return false
	}
	defer p.untrack(u)

	clientClose := req.Close
	if !p.toOriginForm(c, req) {
		return false
	}
	if !p.sendRequest(c, u, req, t) {
		return false
	}
	resp, ok := p.readResponse(c, u, req, t)
	if !ok {
		return false
	}
	defer resp.Body.Close()
	return p.streamResponse(c, u, req, resp, clientClose, t)
}

// absoluteTarget is the host and port of an absolute http:// request
// URI. Anything else is answered with 400 here.
func absoluteTarget(c net.Conn, req *http.Request) (host string, port int, ok bool) {
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		why := "use CONNECT host:port or an absolute http:// URI"
		if req.URL.Scheme == "https" {
			why = "use CONNECT for https"
		}
		writeStatus(c, http.StatusBadRequest, "", why)
		return "", 0, false
	}
	port = 80
	if ps := req.URL.Port(); ps != "" {
		n, err := parsePort(ps)
		if err != nil {
			writeStatus(c, http.StatusBadRequest, "", "invalid port")
			return "", 0, false
		}
		port = n
	}
	return req.URL.Hostname(), port, true
}

// toOriginForm makes req the request to send upstream: hop-by-hop
// headers stripped, an Expect: 100-continue answered to the client here,
// no User-Agent of Go's own, origin form, Connection: close, a body read
// with the idle timeout. False: the client could not be written to.
func (p *Proxy) toOriginForm(c net.Conn, req *http.Request) bool {
	stripHop(req.Header)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // do not add Go's default
	}
	req.Host = req.URL.Host
	req.RequestURI = ""
	req.Close = true
	if req.Body != nil && req.Body != http.NoBody {
		// No Close: Request.Write closes the body when a send fails, and
		// closing a server-side body reads the rest of it from the client
		// (any size, for as long as the client sends). The connection
		// ends instead.
		req.Body = io.NopCloser(&idleReader{r: req.Body, c: c, idle: p.opts.IdleTimeout})
	}
	return true
}

// sendRequest writes req to the upstream u and counts its bytes in t's
// record. False: the send failed and the client has been answered.
func (p *Proxy) sendRequest(c, u net.Conn, req *http.Request, t *target) bool {
	upW := &countWriter{w: u}
	ubw := bufio.NewWriter(upW)
	u.SetWriteDeadline(time.Now().Add(p.opts.IdleTimeout))
	// A failed send (an upstream that answered early and closed, a client
	// body that stopped) ends both connections: what the client still
	// sends of its body must never be read as its next request.
	var err error
	if t.via != nil {
		if t.via.auth != "" {
			req.Header.Set("Proxy-Authorization", t.via.auth)
		}
		err = req.WriteProxy(ubw)
	} else {
		err = req.Write(ubw)
	}
	if err == nil {
		err = ubw.Flush()
	}
	if err != nil {
		t.rec.BytesUp = upW.n
		p.upstreamFailed(c, t.rec, fmt.Errorf("send request: %w", err))
		return false
	}
	u.SetWriteDeadline(time.Time{})
	t.rec.BytesUp = upW.n
	return true
}

// readResponse reads the upstream's response to req, past any 1xx but
// 101, with a bound on its header's size and time. False: there is none
// to forward and the client has been answered.
func (p *Proxy) readResponse(c, u net.Conn, req *http.Request, t *target) (*http.Response, bool) {
	ulim := &limitReader{r: u, n: 16 * int64(p.opts.MaxHeaderBytes)}
	ubr := bufio.NewReader(ulim)
	u.SetReadDeadline(time.Now().Add(p.opts.ResponseHeaderTimeout))
	var resp *http.Response
	for {
		var err error
		resp, err = http.ReadResponse(ubr, req)
		if err != nil {
			p.upstreamFailed(c, t.rec, fmt.Errorf("read response: %w", err))
			return nil, false
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp.Body.Close() // drop other 1xx
	}
	ulim.n = -1
	if resp.StatusCode == http.StatusSwitchingProtocols {
		p.upstreamFailed(c, t.rec, fmt.Errorf("upstream switched protocols; use CONNECT"))
		resp.Body.Close()
		return nil, false
	}
	u.SetReadDeadline(time.Time{})
	return resp, true
}

// streamResponse writes resp to the client as it arrives from u (hop-by-hop
// headers stripped), counts its bytes and emits t's record. It reports
// whether the client connection may serve another request.
func (p *Proxy) streamResponse(c, u net.Conn, req *http.Request, resp *http.Response, clientClose bool, t *target) bool {
	stripHop(resp.Header)
	chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	closeDelimited := resp.ContentLength < 0 && !chunked && req.Method != http.MethodHead &&
		resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
	resp.Close = clientClose || closeDelimited

	dnW := &countWriter{w: &deadlineWriter{c: c, idle: p.opts.IdleTimeout}}
	cbw := bufio.NewWriterSize(dnW, 32<<10)
	if resp.Body != http.NoBody {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{&flushingReader{r: &idleReader{r: resp.Body, c: u, idle: p.opts.IdleTimeout}, w: cbw}, resp.Body}
	}
	// Write through a plain Writer: bufio.Writer's ReadFrom would read into
	// the buffer that flushingReader flushes.
	err := resp.Write(struct{ io.Writer }{cbw})
	if err == nil {
		err = cbw.Flush()
	}
	t.rec.BytesDn = dnW.n
	if err != nil && !p.isStopped() {
		t.rec.Error = "stream response: " + err.Error()
	}
	p.emit(t.rec)
	return err == nil && !resp.Close
}

// idleReader sets c's read deadline to now+idle before each read.
type idleReader struct {
	r    io.Reader
	c    net.Conn
	idle time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.c.SetReadDeadline(time.Now().Add(r.idle))
	return r.r.Read(b)
}

// deadlineWriter sets c's write deadline to now+idle before each write.
type deadlineWriter struct {
	c    net.Conn
	idle time.Duration
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(w.idle))
	return w.c.Write(b)
}

// flushingReader flushes w before each read of r, so that a streamed
// response reaches the client whenever the upstream pauses.
type flushingReader struct {
	r io.Reader
	w *bufio.Writer
}

func (f *flushingReader) Read(b []byte) (int, error) {
	if f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.r.Read(b)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (w *countWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.n += int64(n)
	return n, err
}
