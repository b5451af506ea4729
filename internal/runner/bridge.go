package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("CONNECT %s: %s", target, resp.Status)
	}
	up.SetDeadline(time.Time{})
	return br, nil
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
