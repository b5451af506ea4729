package runner

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// ServerOptions configure Serve.
type ServerOptions struct {
	// Root is the workspace root: relative paths resolve here, file ops
	// refuse paths that leave it (via "..", absolute paths or symlinks), and
	// exec runs here unless the request names a cwd.
	Root string
	// Env is the complete base environment of executed commands. Nil means
	// an empty environment: nothing is inherited implicitly.
	Env []string
	// StateDir, if set, holds the journal of started request ids, so that a
	// restarted runner answers a resent id with CodeInterrupted instead of
	// running it again.
	StateDir string
	// ProxySocket and ProxyListen, both set, start the egress bridge: a TCP
	// listener on ProxyListen whose connections are relayed byte for byte
	// to the unix socket ProxySocket.
	ProxySocket string
	ProxyListen string
	// GatewaySocket and GatewayListen, both set, start the model gateway's
	// bridge the same way.
	GatewaySocket string
	GatewayListen string
	// Forwards are host loopback addresses (127.0.0.1:PORT) that
	// processes inside reach at the same address: with ProxySocket, a
	// listener on each tunnels its connections through the egress proxy
	// (ListenTunnel).
	Forwards []string
	// NoWatchdog turns off the watchdog process that kills the command
	// groups if the runner dies without ending them (a sandbox whose pid
	// namespace ends with the runner does not need it).
	NoWatchdog bool
	// StartCmd, if set, starts each command instead of cmd.Start (the
	// native sandbox's pid 1 forks every command from the one thread
	// whose Landlock domain they must share).
	StartCmd func(*exec.Cmd) error
	// ReapOrphans is for a server that is pid 1 of its pid namespace:
	// every orphan is re-parented to it, and it reaps them while it
	// serves, never a command os/exec waits for (see reapOrphans).
	ReapOrphans bool
	// Ready, if set, is called once everything listens.
	Ready func()
}

// Serve answers runner requests on connections accepted from ln until ctx
// is done or ln is closed; it then kills every command still running and
// returns nil. Any other accept error is returned.
func Serve(ctx context.Context, ln net.Listener, opts ServerOptions) error {
	if len(opts.Forwards) > 0 && opts.ProxySocket == "" {
		// A forward is a tunnel through the egress proxy: without it the
		// agent would find the service refused, with nothing to say why.
		return fmt.Errorf("runner: forwards %v need the egress proxy's socket", opts.Forwards)
	}
	s, err := newServer(opts)
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.ReapOrphans {
		reaped := make(chan struct{})
		go func() {
			defer close(reaped)
			reapOrphans(ctx)
		}()
		defer func() { cancel(); <-reaped }()
	}
	for _, br := range [][2]string{{opts.ProxyListen, opts.ProxySocket}, {opts.GatewayListen, opts.GatewaySocket}} {
		if br[0] == "" || br[1] == "" {
			continue
		}
		b, err := ListenBridge(br[0], br[1])
		if err != nil {
			return err
		}
		go b.Serve()
		defer b.Close()
	}
	for _, addr := range opts.Forwards {
		b, err := ListenTunnel(addr, opts.ProxySocket)
		if err != nil {
			return err
		}
		go b.Serve()
		defer b.Close()
	}
	// Commands run under their own context, ended only once every
	// connection is closed: a command killed because the runner stops is
	// never reported to a client as if it had ended by itself (the client
	// sees its stream drop, and a closed client fails the call with
	// ErrClosed), however late this loop sees its listener closed.
	cmds, killCmds := context.WithCancel(context.WithoutCancel(ctx))
	defer killCmds()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	if opts.Ready != nil {
		opts.Ready()
	}
	var acceptErr error
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				acceptErr = fmt.Errorf("runner accept: %w", err)
			}
			break
		}
		if !s.track(c) {
			c.Close()
			break
		}
		s.wg.Add(1)
		go s.handle(cmds, c)
	}
	cancel()
	s.shutdown()
	killCmds()
	s.wg.Wait()
	return acceptErr
}

type server struct {
	opts      ServerOptions
	root      *os.Root
	rootNames []string // absolute spellings of Root (as given, symlinks resolved)
	instance  string

	mu       sync.Mutex
	inflight map[string]*execution
	finished *resultCache
	previous map[string]bool // ids started by an earlier instance
	journal  *journal
	conns    map[net.Conn]struct{}
	watchdog *watchdog // processWatchdog, shared with every server of the process
	closing  bool
	wg       sync.WaitGroup
}

func newServer(opts ServerOptions) (*server, error) {
	if opts.Root == "" {
		return nil, errors.New("runner: no root")
	}
	abs, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("runner root: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("runner root: %w", err)
	}
	names := []string{filepath.Clean(abs)}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != names[0] {
		names = append(names, real)
	}
	opts.Root = abs
	s := &server{
		opts:      opts,
		root:      root,
		rootNames: names,
		instance:  randomID(8),
		inflight:  map[string]*execution{},
		finished:  newResultCache(defaultCacheEntries, defaultCacheBytes),
		previous:  map[string]bool{},
		conns:     map[net.Conn]struct{}{},
		watchdog:  &processWatchdog,
	}
	if opts.StateDir != "" {
		j, prev, err := openJournal(opts.StateDir)
		if err != nil {
			root.Close()
			return nil, err
		}
		s.journal, s.previous = j, prev
	}
	return s, nil
}

func (s *server) close() {
	s.root.Close()
	if s.journal != nil {
		s.journal.close()
	}
}

func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// shutdown closes every connection; running executions were cancelled by
// the caller's context.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

// connWriter serialises frames on one connection.
type connWriter struct {
	mu sync.Mutex
	c  net.Conn
}

func (w *connWriter) send(r *response) error {
	b, err := encodeResponse(r)
	if err != nil {
		return err
	}
	return w.frame(b)
}

// frame writes one encoded message whole; a failed write closes the
// connection (a half-written frame leaves the stream unusable).
func (w *connWriter) frame(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := WriteFrame(w.c, b); err != nil {
		w.c.Close()
		return err
	}
	return nil
}

func (s *server) handle(ctx context.Context, c net.Conn) {
	defer s.wg.Done()
	defer s.untrack(c)
	defer c.Close()
	h, _ := json.Marshal(hello{Proto: ProtocolVersion, Instance: s.instance, PID: os.Getpid()})
	if err := WriteFrame(c, h); err != nil {
		return
	}
	w := &connWriter{c: c}
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		frame, err := ReadFrame(br)
		if err != nil {
			return
		}
		req, err := decodeRequest(frame)
		if err != nil {
			return // a bad frame closes the connection
		}
		if req.Op == opCancel {
			s.cancel(req.ID)
			continue
		}
		e := s.start(ctx, req)
		off := [2]int64{max(req.StdoutOff, 0), max(req.StderrOff, 0)}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			e.stream(w, off)
		}()
	}
}

// start returns the execution for req.ID: the running one, the finished
// one, or a new one (started now). An id an earlier runner instance started
// is answered with CodeInterrupted and never run.
func (s *server) start(ctx context.Context, req *request) *execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.inflight[req.ID]; e != nil {
		return e
	}
	if e := s.finished.get(req.ID); e != nil {
		return e
	}
	if s.previous[req.ID] {
		return doneExecution(req.ID, &OpError{Code: CodeInterrupted, Message: "the runner restarted while this request ran; it was not run again"})
	}
	if s.finished.forgotten(req.ID) {
		return doneExecution(req.ID, &OpError{Code: CodeInterrupted, Message: "the result of this request is no longer kept; it was not run again"})
	}
	e := newExecution(req.ID, req.Op)
	s.inflight[req.ID] = e
	if s.journal != nil && mutating(req.Op) {
		if err := s.journal.add(req.ID); err != nil {
			delete(s.inflight, req.ID)
			e.finish(&response{ID: req.ID, Done: true, Fail: "journal: " + err.Error()})
			return e
		}
	}
	ectx, cancel := context.WithCancel(ctx)
	e.cancelFn = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		resp := s.do(ectx, e, req)
		e.finish(resp)
		s.mu.Lock()
		delete(s.inflight, req.ID)
		s.finished.put(e)
		s.mu.Unlock()
	}()
	return e
}

func (s *server) cancel(id string) {
	s.mu.Lock()
	e := s.inflight[id]
	s.mu.Unlock()
	if e != nil {
		e.cancel()
	}
}

// do runs one op and makes its final response.
func (s *server) do(ctx context.Context, e *execution, req *request) *response {
	resp := &response{ID: req.ID, Done: true}
	var (
		res any
		err error
	)
	switch req.Op {
	case opExec:
		res, err = serve(req.Args, func(a *ExecRequest) (*ExecResult, error) { return s.exec(ctx, e, a) })
	case opReadFile:
		res, err = serve(req.Args, s.readFile)
	case opWriteFile:
		res, err = serve(req.Args, s.writeFile)
	case opEditFile:
		res, err = serve(req.Args, s.editFile)
	case opListDir:
		res, err = serve(req.Args, s.listDir)
	case opGrep:
		res, err = serve(req.Args, func(a *GrepRequest) (*GrepResult, error) { return s.grep(ctx, a) })
	case opStat:
		res, err = serve(req.Args, s.stat)
	default:
		err = &OpError{Code: CodeBadRequest, Message: "unknown op " + req.Op}
	}
	if err != nil {
		var oe *OpError
		if errors.As(err, &oe) {
			resp.Error = oe
		} else {
			resp.Fail = err.Error()
		}
		return resp
	}
	b, err := marshalBody(res)
	if err != nil {
		resp.Fail = "encode result: " + err.Error()
		return resp
	}
	resp.Result = b
	return resp
}

// serve decodes an op's arguments into a fresh A and runs f on them.
func serve[A, R any](raw json.RawMessage, f func(*A) (R, error)) (any, error) {
	var a A
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	return f(&a)
}

func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := unmarshalBody(raw, v); err != nil {
		return &OpError{Code: CodeBadRequest, Message: "bad arguments: " + err.Error()}
	}
	return nil
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
