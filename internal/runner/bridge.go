package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Bridge relays TCP connections accepted on a loopback address to a unix
// socket, byte for byte (the egress proxy's socket). It never looks at the
// bytes: policy is the proxy's job.
type Bridge struct {
	ln     net.Listener
	target string
	// connect, when set, is the host:port each connection is tunnelled
	// to: the bridge asks the proxy at target for it (CONNECT) first.
	connect string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ListenBridge listens on the TCP address listen (e.g. 127.0.0.1:0) for
// connections to relay to the unix socket target. Call Serve to relay.
func ListenBridge(listen, target string) (*Bridge, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("proxy bridge listen %s: %w", listen, err)
	}
	return &Bridge{ln: ln, target: target, conns: map[net.Conn]struct{}{}}, nil
}

// ListenTunnel listens on the TCP address listen inside a sandbox for
// connections that reach the host's own address of that name (its
// loopback service, which the sandbox's loopback is not): each is
// tunnelled through the egress proxy at the unix socket proxy with a
// CONNECT to listen, which the proxy's policy decides and journals as any
// other. A connection the proxy refuses is closed.
func ListenTunnel(listen, proxy string) (*Bridge, error) {
	b, err := ListenBridge(listen, proxy)
	if err != nil {
		return nil, err
	}
	b.connect = listen
	return b, nil
}

// Addr is the address the bridge listens on.
func (b *Bridge) Addr() net.Addr { return b.ln.Addr() }

// Serve relays until Close. It returns nil after Close.
func (b *Bridge) Serve() error {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("proxy bridge accept: %w", err)
		}
		if !b.track(c) {
			c.Close()
			return nil
		}
		b.wg.Add(1)
		go b.relay(c)
	}
}

// Close stops accepting, cuts every relayed connection and waits for the
// relays to end. Safe to call twice.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	err := b.ln.Close()
	b.wg.Wait()
	return err
}

func (b *Bridge) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Bridge) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
}

func (b *Bridge) relay(c net.Conn) {
	defer b.wg.Done()
	defer b.untrack(c)
	defer c.Close()
	up, err := net.Dial("unix", b.target)
	if err != nil {
		return
	}
	if !b.track(up) {
		up.Close()
		return
	}
	defer b.untrack(up)
	defer up.Close()
	var from io.Reader = up
	if b.connect != "" {
		br, err := tunnel(up, b.connect)
		if err != nil {
			return
		}
		from = br
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		if _, err := io.Copy(dst, src); err != nil {
			// A reset or a cut: end both directions.
			dst.Close()
			src.Close()
		} else {
			closeWrite(dst)
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go func() {
		_, err := io.Copy(c, from)
		if err != nil {
			c.Close()
			up.Close()
		} else {
			closeWrite(c)
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// tunnel asks the proxy on up for a tunnel to target and returns what
// reads the tunnel (the proxy's answer may carry its first bytes).
func tunnel(up net.Conn, target string) (*bufio.Reader, error) {
	up.SetDeadline(time.Now().Add(tunnelTimeout))
	if _, err := io.WriteString(up, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		return nil, err
	}
	br := bufio.NewReader(up)
	if err := readConnectAnswer(br); err != nil {
		return nil, fmt.Errorf("CONNECT %s: %w", target, err)
	}
	up.SetDeadline(time.Time{})
	return br, nil
}

// readConnectAnswer reads a proxy's answer to CONNECT from br up to the
// end of its header, leaving in br what follows (the tunnel's first
// bytes), and fails unless its status is 2xx (RFC 9110 9.3.6: any 2xx
// answer to CONNECT opens the tunnel). It stands in for net/http's
// ReadResponse: the runner runs in the sandbox's init, whose package is
// initialized only once everything it imports is, and net/http (with
// crypto/tls and mime/multipart) is initialized late in the binary's
// order: importing it made the init run some 30 packages' initializers
// it never uses before it could start. (net/textproto, which sorts after
// modernc.org/..., would still put four of them, libc's among them,
// first.)
func readConnectAnswer(br *bufio.Reader) error {
	line, err := readAnswerLine(br)
	if err != nil {
		return err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(proto, "HTTP/1.") || len(code) != 3 || code[0] < '1' || code[0] > '5' ||
		strings.Trim(code, "0123456789") != "" {
		return fmt.Errorf("the proxy's answer is not HTTP: %q", line)
	}
	for n := 0; ; n++ {
		h, err := readAnswerLine(br)
		if err != nil {
			return err
		}
		if h == "" {
			break
		}
		if n == maxAnswerHeaders {
			return fmt.Errorf("the proxy's answer has over %d header lines", maxAnswerHeaders)
		}
	}
	if code[0] != '2' {
		return errors.New(strings.TrimSpace(rest))
	}
	return nil
}

// Bounds of a proxy's answer to CONNECT: the length of one of its lines
// and how many header lines it has.
const (
	maxAnswerLine    = 8 << 10
	maxAnswerHeaders = 100
)

// readAnswerLine reads one line of a proxy's answer, without its CRLF
// (or LF).
func readAnswerLine(br *bufio.Reader) (string, error) {
	var line []byte
	for {
		chunk, more, err := br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return "", fmt.Errorf("the proxy's answer: %w", err)
		}
		if line = append(line, chunk...); len(line) > maxAnswerLine {
			return "", fmt.Errorf("the proxy's answer has a line over %d bytes", maxAnswerLine)
		}
		if !more {
			return string(line), nil
		}
	}
}

// tunnelTimeout bounds the proxy's answer to a tunnel's CONNECT (its
// resolving and dialling are bounded by its own 15 s).
const tunnelTimeout = 30 * time.Second

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
