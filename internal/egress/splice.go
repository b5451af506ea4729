package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// splice copies client→upstream (reading through cr, which may hold bytes
// the client sent right after its CONNECT) and upstream→client until both
// directions end. A clean EOF half-closes the other side; an error or
// idle (no byte in either direction for idle) closes both. It returns the
// bytes carried up and down and the first error other than EOF.
func splice(client net.Conn, cr io.Reader, upstream net.Conn, idle time.Duration) (up, down int64, err error) {
	t := &tunnel{idle: idle}
	t.touch()
	var wg sync.WaitGroup
	var upErr, dnErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		up, upErr = t.pipe(upstream, cr, client)
		if upErr != nil {
			client.Close()
			upstream.Close()
		} else {
			closeWrite(upstream)
		}
	}()
	go func() {
		defer wg.Done()
		down, dnErr = t.pipe(client, upstream, upstream)
		if dnErr != nil {
			client.Close()
			upstream.Close()
		} else {
			closeWrite(client)
		}
	}()
	wg.Wait()
	return up, down, errors.Join(upErr, dnErr)
}

type tunnel struct {
	idle time.Duration
	last atomic.Int64 // unix nanos of the last byte either way
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

func (t *tunnel) quiet() time.Duration {
	return time.Duration(time.Now().UnixNano() - t.last.Load())
}

var errIdle = errors.New("idle timeout")

// pipe copies src (whose deadlines are set on srcConn) to dst.
func (t *tunnel) pipe(dst net.Conn, src io.Reader, srcConn net.Conn) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		srcConn.SetReadDeadline(time.Now().Add(t.idle))
		nr, rerr := src.Read(buf)
		if nr > 0 {
			t.touch()
			dst.SetWriteDeadline(time.Now().Add(t.idle))
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF):
			return n, nil
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			if t.quiet() < t.idle {
				continue // the other direction is busy
			}
			return n, errIdle
		default:
			if errors.Is(rerr, net.ErrClosed) {
				return n, nil // closed by the other direction or by Stop
			}
			return n, rerr
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}
