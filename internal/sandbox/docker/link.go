package docker

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The runner's connection goes from the inside out: the host listens on a
// unix socket in the state dir (a directory only the host user can
// write), mounted read-only into the container, and the runner dials it
// and first sends the run's token, which only the init and the runner
// hold (in their non-dumpable memory). The agent runs as the same uid as
// the runner, so it can connect to that socket too, but it cannot replace
// it (a read-only mount on a read-only root) nor present the token, so a
// connection of its own is dropped and the one it would impersonate is
// never its. A runner serving on a socket in a directory the agent can
// write had no such guarantee: the agent could have put a relay there.
const (
	tokenLen      = 64 // hex characters
	verifyTimeout = 5 * time.Second
	maxUnverified = 8 // connections still to send their token
)

// link is the host's end: it accepts connections, keeps those that sent
// the token, and hands them to the runner client one by one.
type link struct {
	ln     net.Listener
	token  []byte
	conns  chan net.Conn // verified, not yet taken
	slots  chan struct{} // unverified connections in flight
	closed chan struct{}
	once   sync.Once
}

// listenLink listens on the unix socket path (through dir's descriptor
// when the path is too long for sun_path), only for this user.
func listenLink(dir *os.File, path, token string) (*link, error) {
	ln, err := net.Listen("unix", dialablePath(dir, path))
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dialablePath(dir, path), 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	l := &link{ln: ln, token: []byte(token), conns: make(chan net.Conn, 1),
		slots: make(chan struct{}, maxUnverified), closed: make(chan struct{})}
	go l.accept()
	return l, nil
}

func (l *link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		select {
		case l.slots <- struct{}{}:
			go l.verify(c)
		default:
			c.Close() // a flood of connections that say nothing
		}
	}
}

// verify keeps c if its first bytes are the token.
func (l *link) verify(c net.Conn) {
	defer func() { <-l.slots }()
	c.SetReadDeadline(time.Now().Add(verifyTimeout))
	got := make([]byte, len(l.token))
	if _, err := io.ReadFull(c, got); err != nil || subtle.ConstantTimeCompare(got, l.token) != 1 {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	select {
	case l.conns <- c:
	default:
		c.Close() // the runner keeps one connection; this one is spare
	}
}

// Dial is the runner client's dialler: the next verified connection.
func (l *link) Dial(ctx context.Context) (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops listening (and removes the socket) and drops a connection
// not yet taken.
func (l *link) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		err = l.ln.Close()
		select {
		case c := <-l.conns:
			c.Close()
		default:
		}
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// outListener is the runner's end, a net.Listener for runner.Serve whose
// Accept dials the host's socket and sends the token: one connection at a
// time, dialled again (with backoff) once the last one is closed.
type outListener struct {
	path   string
	token  string
	free   chan struct{} // holds a value while no connection is open
	closed chan struct{}
	once   sync.Once
}

func dialOut(path, token string) *outListener {
	l := &outListener{path: path, token: token, free: make(chan struct{}, 1), closed: make(chan struct{})}
	l.free <- struct{}{}
	return l
}

func (l *outListener) Accept() (net.Conn, error) {
	select {
	case <-l.free:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	backoff := time.Millisecond
	for {
		c, err := net.Dial("unix", l.path)
		if err == nil {
			if _, err = io.WriteString(c, l.token); err == nil {
				return &outConn{Conn: c, free: l.free}, nil
			}
			c.Close()
		}
		select {
		case <-l.closed:
			l.free <- struct{}{}
			return nil, net.ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

func (l *outListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *outListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// outConn gives its listener's turn back when closed.
type outConn struct {
	net.Conn
	free chan struct{}
	once sync.Once
}

func (c *outConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.free <- struct{}{} })
	return err
}
