package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DialOptions configure Dial.
type DialOptions struct {
	// Wait keeps retrying the first dial while the socket does not exist
	// or refuses connections, up to this long (0: one attempt). A backend
	// that has just started its runner uses it.
	Wait time.Duration
	// ReconnectTimeout bounds how long a cut stream is redialled before the
	// requests in flight fail (0: 10s).
	ReconnectTimeout time.Duration
	// HandshakeTimeout bounds reading the server's hello (0: 5s).
	HandshakeTimeout time.Duration
	// Dial, if set, makes each connection instead of dialling the socket
	// path: a backend whose runner connects out to the host hands over
	// the runner's authenticated connections here.
	Dial func(ctx context.Context) (net.Conn, error)
}

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("runner client closed")

// Dial connects to the runner serving on the unix socket socketPath. The
// client multiplexes concurrent requests over one connection, redials with
// backoff when the stream is cut and resumes the requests in flight; if the
// runner on the other side is a new instance (it restarted), requests that
// were sent fail with CodeInterrupted instead of being sent again.
func Dial(ctx context.Context, socketPath string, opts DialOptions) (Client, error) {
	if opts.ReconnectTimeout <= 0 {
		opts.ReconnectTimeout = 10 * time.Second
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 5 * time.Second
	}
	cl := &client{path: socketPath, opts: opts, prefix: randomID(6), calls: map[string]*call{}, closing: make(chan struct{})}
	deadline := time.Now().Add(opts.Wait)
	backoff := 2 * time.Millisecond
	for {
		conn, h, br, err := cl.dialOnce(ctx)
		if err == nil {
			cl.instance = h.Instance
			cl.setConn(conn)
			go cl.readLoop(conn, cl.gen, br)
			return cl, nil
		}
		if opts.Wait <= 0 || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial runner %s: %w", socketPath, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

type client struct {
	path    string
	opts    DialOptions
	prefix  string
	seq     atomic.Uint64
	closing chan struct{}

	mu           sync.Mutex
	conn         net.Conn // nil while the stream is down
	w            *connWriter
	gen          int
	instance     string
	calls        map[string]*call
	reconnecting bool
	closed       bool
	// outage is when the stream was first lost since it last carried a
	// valid response; redialling gives up ReconnectTimeout after it, even
	// across connections that break again at once.
	outage  time.Time
	healthy bool
}

type call struct {
	id     string
	op     string
	args   json.RawMessage
	outs   [2]io.Writer
	doneCh chan struct{}
	once   sync.Once
	resp   *response
	err    error

	// guarded by client.mu
	sent      bool
	cancelled bool

	mu  sync.Mutex // guards off and writes to outs
	off [2]int64
	// limit caps what is written to each of outs: the runner is on the
	// other side of an isolation boundary and is not trusted to honour
	// the output cap itself.
	limit int64
}

func (c *call) finish(r *response, err error) {
	c.once.Do(func() {
		c.resp, c.err = r, err
		close(c.doneCh)
	})
}

// deliver writes the part of a chunk the caller does not have yet.
func (c *call) deliver(r *response) {
	i := 0
	switch r.Stream {
	case streamStdout:
	case streamStderr:
		i = 1
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Off < 0 {
		return
	}
	end := r.Off + int64(len(r.Data))
	if end <= c.off[i] {
		return
	}
	data := r.Data[max(c.off[i]-r.Off, 0):]
	written := c.off[i]
	c.off[i] = end
	if c.limit > 0 {
		data = data[:max(min(int64(len(data)), c.limit-written), 0)]
	}
	if c.outs[i] != nil && len(data) > 0 {
		c.outs[i].Write(data)
	}
}

func (cl *client) dialOnce(ctx context.Context) (net.Conn, *hello, *bufio.Reader, error) {
	var conn net.Conn
	var err error
	if cl.opts.Dial != nil {
		conn, err = cl.opts.Dial(ctx)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "unix", cl.path)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dial runner: %w", err)
	}
	conn.SetReadDeadline(time.Now().Add(cl.opts.HandshakeTimeout))
	br := bufio.NewReaderSize(conn, 64<<10)
	frame, err := ReadFrame(br)
	if err != nil {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("runner handshake: %w", err)
	}
	var h hello
	if err := json.Unmarshal(frame, &h); err != nil || h.Instance == "" {
		conn.Close()
		return nil, nil, nil, errors.New("runner handshake: bad hello")
	}
	if h.Proto != ProtocolVersion {
		conn.Close()
		return nil, nil, nil, fmt.Errorf("runner handshake: protocol %d, want %d", h.Proto, ProtocolVersion)
	}
	conn.SetReadDeadline(time.Time{})
	return conn, &h, br, nil
}

// setConn installs a connection; the caller holds no lock.
func (cl *client) setConn(conn net.Conn) {
	cl.mu.Lock()
	cl.conn = conn
	cl.w = &connWriter{c: conn}
	cl.mu.Unlock()
}

func (cl *client) readLoop(conn net.Conn, gen int, br *bufio.Reader) {
	for {
		frame, err := ReadFrame(br)
		if err != nil {
			cl.broken(gen, err)
			return
		}
		r, err := decodeResponse(frame)
		if err != nil {
			cl.broken(gen, fmt.Errorf("bad frame: %w", err))
			return
		}
		cl.mu.Lock()
		cl.healthy = true
		c := cl.calls[r.ID]
		if c != nil && r.Done {
			delete(cl.calls, r.ID)
		}
		cl.mu.Unlock()
		if c == nil {
			continue
		}
		if r.Done {
			c.finish(r, nil)
		} else {
			c.deliver(r)
		}
	}
}

// broken handles the loss of connection generation gen.
func (cl *client) broken(gen int, cause error) {
	cl.mu.Lock()
	if gen != cl.gen || cl.closed {
		cl.mu.Unlock()
		return
	}
	if cl.conn != nil {
		cl.conn.Close()
	}
	cl.conn, cl.w = nil, nil
	cl.gen++
	cl.reconnecting = true
	if cl.healthy || cl.outage.IsZero() {
		cl.outage = time.Now()
	}
	cl.healthy = false
	deadline := cl.outage.Add(cl.opts.ReconnectTimeout)
	cl.mu.Unlock()
	go cl.reconnect(cause, deadline)
}

// reconnect redials with backoff until ReconnectTimeout, then fails every
// call in flight.
func (cl *client) reconnect(cause error, deadline time.Time) {
	backoff := 2 * time.Millisecond
	if !time.Now().Before(deadline.Add(-cl.opts.ReconnectTimeout / 2)) {
		backoff = 50 * time.Millisecond // a connection that keeps breaking
	}
	for {
		if err := cl.checkDeadline(cause, deadline, nil); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cl.opts.HandshakeTimeout)
		conn, h, br, err := cl.dialOnce(ctx)
		cancel()
		if err == nil {
			cl.resume(conn, h, br)
			return
		}
		if cl.checkDeadline(cause, deadline, err) != nil {
			return
		}
		select {
		case <-cl.closing:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 250*time.Millisecond)
	}
}

// checkDeadline fails every call in flight once the outage has lasted too
// long, and then returns an error.
func (cl *client) checkDeadline(cause error, deadline time.Time, last error) error {
	if time.Now().Before(deadline) {
		return nil
	}
	cl.mu.Lock()
	cl.reconnecting = false
	cl.outage = time.Time{}
	calls := cl.calls
	cl.calls = map[string]*call{}
	cl.mu.Unlock()
	err := fmt.Errorf("runner connection lost: %v", cause)
	if last != nil {
		err = fmt.Errorf("runner connection lost (%v); redial: %w", cause, last)
	}
	for _, c := range calls {
		c.finish(nil, err)
	}
	return err
}

// resume installs a new connection and resends the calls in flight, or,
// if the runner restarted, fails those it had already been sent.
func (cl *client) resume(conn net.Conn, h *hello, br *bufio.Reader) {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		conn.Close()
		return
	}
	cl.conn = conn
	cl.w = &connWriter{c: conn}
	cl.reconnecting = false
	gen, w := cl.gen, cl.w
	var resend, lost []*call
	restarted := h.Instance != cl.instance
	cl.instance = h.Instance
	for id, c := range cl.calls {
		if restarted && c.sent {
			delete(cl.calls, id)
			lost = append(lost, c)
			continue
		}
		resend = append(resend, c)
	}
	cl.mu.Unlock()
	go cl.readLoop(conn, gen, br)
	for _, c := range lost {
		c.finish(&response{ID: c.id, Done: true, Error: &OpError{Code: CodeInterrupted, Message: "the runner restarted while this request ran; it was not run again"}}, nil)
	}
	for _, c := range resend {
		cl.send(w, gen, c)
	}
}

// send writes the call (with the output offsets the caller already has) on
// w, then a cancel if the caller cancelled it.
func (cl *client) send(w *connWriter, gen int, c *call) {
	cl.mu.Lock()
	c.sent = true
	cancelled := c.cancelled
	cl.mu.Unlock()
	c.mu.Lock()
	req := &request{ID: c.id, Op: c.op, Args: c.args, StdoutOff: c.off[0], StderrOff: c.off[1]}
	c.mu.Unlock()
	if err := writeRequest(w, req); err != nil {
		cl.broken(gen, err)
		return
	}
	if cancelled {
		if err := writeRequest(w, &request{ID: c.id, Op: opCancel}); err != nil {
			cl.broken(gen, err)
		}
	}
}

func writeRequest(w *connWriter, req *request) error {
	b, err := encodeRequest(req)
	if err != nil {
		return err
	}
	return w.frame(b)
}

// roundTrip runs one request and returns its result.
func (cl *client) roundTrip(ctx context.Context, op string, args any, stdout, stderr io.Writer, limit int64, cancelWait time.Duration) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, err := marshalBody(args)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", op, err)
	}
	c := &call{
		id:     cl.prefix + "-" + fmt.Sprint(cl.seq.Add(1)),
		op:     op,
		args:   raw,
		outs:   [2]io.Writer{stdout, stderr},
		doneCh: make(chan struct{}),
		limit:  limit,
	}
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, ErrClosed
	}
	cl.calls[c.id] = c
	w, gen := cl.w, cl.gen
	if w == nil && !cl.reconnecting {
		// The stream is down and nobody is redialling: start again.
		cl.reconnecting = true
		cl.outage = time.Now()
		go cl.reconnect(errors.New("stream down"), cl.outage.Add(cl.opts.ReconnectTimeout))
	}
	cl.mu.Unlock()
	if w != nil {
		cl.send(w, gen, c)
	}
	select {
	case <-c.doneCh:
		return result(c)
	case <-ctx.Done():
	}
	if cancelWait <= 0 {
		// Stop it (a long grep) but do not wait for its answer.
		cl.mu.Lock()
		delete(cl.calls, c.id)
		w, gen = cl.w, cl.gen
		sent := c.sent
		cl.mu.Unlock()
		if w != nil && sent {
			if err := writeRequest(w, &request{ID: c.id, Op: opCancel}); err != nil {
				cl.broken(gen, err)
			}
		}
		return nil, ctx.Err()
	}
	// Ask the runner to stop it and wait (bounded) for its answer, so the
	// command is known to be gone when we return.
	cl.mu.Lock()
	if !c.sent {
		// Never sent: nothing runs; do not send it later.
		delete(cl.calls, c.id)
		cl.mu.Unlock()
		return nil, ctx.Err()
	}
	c.cancelled = true
	w, gen = cl.w, cl.gen
	cl.mu.Unlock()
	if w != nil {
		if err := writeRequest(w, &request{ID: c.id, Op: opCancel}); err != nil {
			cl.broken(gen, err)
		}
	}
	t := time.NewTimer(cancelWait)
	defer t.Stop()
	select {
	case <-c.doneCh:
		res, err := result(c)
		if err != nil {
			return nil, err
		}
		return res, ctx.Err()
	case <-t.C:
		cl.forget(c.id)
		return nil, ctx.Err()
	}
}

func (cl *client) forget(id string) {
	cl.mu.Lock()
	delete(cl.calls, id)
	cl.mu.Unlock()
}

func result(c *call) (json.RawMessage, error) {
	if c.err != nil {
		return nil, c.err
	}
	r := c.resp
	switch {
	case r.Error != nil:
		return nil, r.Error
	case r.Fail != "":
		return nil, errors.New("runner: " + r.Fail)
	}
	return r.Result, nil
}

func call1[T any](cl *client, ctx context.Context, op string, args any) (*T, error) {
	raw, err := cl.roundTrip(ctx, op, args, nil, nil, 0, 0)
	if err != nil {
		return nil, err
	}
	var v T
	if err := unmarshalBody(raw, &v); err != nil {
		return nil, fmt.Errorf("decode %s result: %w", op, err)
	}
	return &v, nil
}

// bounds is the output cap per stream and the kill grace of req, with the
// defaults filled in: the client waits by them, the server enforces them.
func (req *ExecRequest) bounds() (limit int64, grace time.Duration) {
	limit, grace = req.OutputCap, req.KillGrace
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	return limit, grace
}

// Exec runs a command; see Client. If ctx is cancelled, the command is
// killed and Exec returns its result (Cancelled set) together with
// ctx.Err().
func (cl *client) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (*ExecResult, error) {
	limit, grace := req.bounds()
	// The runner keeps the head and the tail of each stream, with a cut
	// note in between: at most a note past the cap.
	raw, err := cl.roundTrip(ctx, opExec, req, stdout, stderr, limit+maxCutNote, grace+5*time.Second)
	if raw == nil {
		return nil, err
	}
	var res ExecResult
	if derr := json.Unmarshal(raw, &res); derr != nil {
		return nil, fmt.Errorf("decode exec result: %w", derr)
	}
	return &res, err
}

func (cl *client) ReadFile(ctx context.Context, req ReadFileRequest) (*ReadFileResult, error) {
	return call1[ReadFileResult](cl, ctx, opReadFile, req)
}

func (cl *client) WriteFile(ctx context.Context, req WriteFileRequest) (*WriteFileResult, error) {
	if int64(len(req.Data)) > DefaultWriteCap {
		// The runner refuses it too; do not ship the bytes to hear so.
		return nil, &OpError{Code: CodeTooLarge, Message: req.Path + ": data is larger than the write cap"}
	}
	return call1[WriteFileResult](cl, ctx, opWriteFile, req)
}

func (cl *client) EditFile(ctx context.Context, req EditFileRequest) (*EditFileResult, error) {
	return call1[EditFileResult](cl, ctx, opEditFile, req)
}

func (cl *client) ListDir(ctx context.Context, req ListDirRequest) (*ListDirResult, error) {
	return call1[ListDirResult](cl, ctx, opListDir, req)
}

func (cl *client) Grep(ctx context.Context, req GrepRequest) (*GrepResult, error) {
	return call1[GrepResult](cl, ctx, opGrep, req)
}

func (cl *client) Stat(ctx context.Context, req StatRequest) (*StatResult, error) {
	return call1[StatResult](cl, ctx, opStat, req)
}

// Close releases the client; calls in flight fail with ErrClosed. It does
// not stop the runner. Idempotent.
func (cl *client) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	close(cl.closing)
	if cl.conn != nil {
		cl.conn.Close()
	}
	calls := cl.calls
	cl.calls = map[string]*call{}
	cl.mu.Unlock()
	for _, c := range calls {
		c.finish(nil, ErrClosed)
	}
	return nil
}
