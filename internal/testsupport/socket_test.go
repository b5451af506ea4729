package testsupport_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// roundTrip sends payload, half-closes, and reads until the server's EOF.
func roundTrip(t *testing.T, network, addr string, payload []byte) []byte {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func payload() []byte {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func TestEchoTCP(t *testing.T) {
	port := testsupport.EchoTCP(t)
	p := payload()
	for range 3 {
		if got := roundTrip(t, "tcp", "127.0.0.1:"+strconv.Itoa(port), p); string(got) != string(p) {
			t.Fatalf("echoed %d bytes, sent %d", len(got), len(p))
		}
	}
}

func TestEchoUnix(t *testing.T) {
	sock := testsupport.EchoUnix(t, "")
	if got := roundTrip(t, "unix", sock, []byte("hello")); string(got) != "hello" {
		t.Fatalf("echoed %q", got)
	}
	named := filepath.Join(testsupport.ShortDir(t), "named.sock")
	if got := testsupport.EchoUnix(t, named); got != named {
		t.Fatalf("path %q, want %q", got, named)
	}
	if got := roundTrip(t, "unix", named, []byte("again")); string(got) != "again" {
		t.Fatalf("echoed %q", got)
	}
}

// The listener and the directory are gone after the test.
func TestSocketCleanup(t *testing.T) {
	var dir string
	var port int
	t.Run("inner", func(t *testing.T) {
		dir = testsupport.ShortDir(t)
		port = testsupport.EchoTCP(t)
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s still there: %v", dir, err)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Error("listener still accepts after cleanup")
	}
}

// A unix socket path in a ShortDir fits sun_path even under a long test name.
func TestShortDirFitsSunPath(t *testing.T) {
	if n := len(filepath.Join(testsupport.ShortDir(t), "proxy.sock")); n > 100 {
		t.Fatalf("socket path is %d bytes", n)
	}
}
