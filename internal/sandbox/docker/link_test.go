package docker

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

func newLink(t *testing.T) (*link, string, string) {
	t.Helper()
	dirPath := testsupport.ShortDir(t)
	dir, err := os.Open(dirPath)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	token := randomHex(tokenLen / 2)
	path := filepath.Join(dirPath, runnerSock)
	l, err := listenLink(dir, path, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path, token
}

func dialWithin(l *link, d time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Dial(ctx)
}

// A connection is handed over only after it sent the token; one that
// sends anything else, or nothing, is dropped.
func TestLinkTakesOnlyTheToken(t *testing.T) {
	l, path, token := newLink(t)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	for _, bad := range []string{strings.Repeat("0", tokenLen), token[:tokenLen-1] + "x", "\x00hello"} {
		// A short one is dropped when verifyTimeout passes.
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, bad)
		// The host hangs up on it, and never hands it over.
		c.SetReadDeadline(time.Now().Add(verifyTimeout + 2*time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("a connection with token %q is still open: %v", bad, err)
		}
		c.Close()
	}
	if c, err := dialWithin(l, 100*time.Millisecond); err == nil {
		t.Fatalf("a connection without the token was handed over: %v", c.LocalAddr())
	}
	out := dialOut(path, token)
	defer out.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := out.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	c, err := dialWithin(l, 5*time.Second)
	if err != nil {
		t.Fatalf("the runner's connection was not handed over: %v", err)
	}
	rc := <-got
	io.WriteString(rc, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q %v", b, err)
	}
	// One connection at a time: the next Accept waits for this one to
	// close, then dials again.
	next := make(chan net.Conn, 1)
	go func() {
		c, err := out.Accept()
		if err == nil {
			next <- c
		}
	}()
	select {
	case <-next:
		t.Fatal("a second connection while the first is open")
	case <-time.After(100 * time.Millisecond):
	}
	rc.Close()
	c.Close()
	if _, err := dialWithin(l, 5*time.Second); err != nil {
		t.Fatalf("no redial after the connection closed: %v", err)
	}
	(<-next).Close()
}

// Connections that never send anything cannot keep the runner's out for
// good: past maxUnverified they are refused at once, and each is dropped
// after verifyTimeout.
func TestLinkFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the verify timeout")
	}
	l, path, token := newLink(t)
	var silent []net.Conn
	for range maxUnverified * 3 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	out := dialOut(path, token)
	defer out.Close()
	go func() {
		// Accept returns once the token is written; the host may still
		// hang up on it while its slots are full, and the runner's
		// server would then close it and dial again.
		for {
			c, err := out.Accept()
			if err != nil {
				return
			}
			if _, err := c.Read(make([]byte, 1)); err != nil {
				c.Close()
				continue
			}
			return
		}
	}()
	start := time.Now()
	c, err := dialWithin(l, verifyTimeout+5*time.Second)
	if err != nil {
		t.Fatalf("the runner never got through the flood: %v", err)
	}
	c.Write([]byte{1})
	c.Close()
	t.Logf("through after %v", time.Since(start).Round(time.Millisecond))
}

func TestOutListenerClose(t *testing.T) {
	out := dialOut(filepath.Join(t.TempDir(), "none.sock"), "t")
	done := make(chan error, 1)
	go func() {
		_, err := out.Accept()
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	out.Close()
	select {
	case err := <-done:
		if err != net.ErrClosed {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}
