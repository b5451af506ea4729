package runner

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Bridge relays TCP connections accepted on a loopback address to a unix
// socket, byte for byte (the egress proxy's socket). It never looks at the
// bytes: policy is the proxy's job.
type Bridge struct {
	ln     net.Listener
	target string

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
	go pipe(c, up)
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
