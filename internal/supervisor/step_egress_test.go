package supervisor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// connect asks the proxy on socket for a tunnel to addr and returns the
// status and, when it was opened, the tunnel.
func connect(t *testing.T, socket, addr string) (int, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return resp.StatusCode, nil
	}
	return resp.StatusCode, c
}

// TestEgressStep: with the allowlist network, Start serves the real proxy
// on a unix socket; a tunnel to an allowed address carries bytes, another
// is refused, and each decision is journaled. Stop removes the socket and
// is safe twice.
func TestEgressStep(t *testing.T) {
	echo := "127.0.0.1:" + strconv.Itoa(testsupport.EchoTCP(t))
	r, l := stepRun(t, t.TempDir(), "")
	r.Sandbox.Network, r.Sandbox.Allow = string(sandbox.NetworkAllowlist), []string{echo}
	j := &journal{}
	s := &egressStep{Record: r, Layout: l, StartProxy: testDeps(nil, l).StartEgress, Event: j.add}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sock := s.Socket()
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %q: %v", sock, err)
	}
	code, c := connect(t, sock, echo)
	if code != http.StatusOK {
		t.Fatalf("CONNECT %s: %d", echo, code)
	}
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q %v", buf, err)
	}
	c.Close()
	if code, _ := connect(t, sock, "127.0.0.2:9"); code != http.StatusForbidden {
		t.Fatalf("CONNECT to an address not allowed: %d", code)
	}
	s.Stop(ctx) // the last decisions are journaled when Stop returns
	s.Stop(ctx)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after Stop: %v", err)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("the proxy still answers after Stop")
	}
	evs := j.of("egress")
	if len(evs) != 2 || j.len() != 2 {
		t.Fatalf("egress events %+v", j.evs)
	}
	// (A tunnel's record comes when it ends: in either order.)
	allowed, denied := data(t, evs[0]), data(t, evs[1])
	if allowed["host"] != "127.0.0.1" {
		allowed, denied = denied, allowed
	}
	if allowed["allowed"] != true || denied["allowed"] != false || allowed["host"] != "127.0.0.1" || denied["host"] != "127.0.0.2" {
		t.Fatalf("records %v, %v", allowed, denied)
	}
	hasKeys(t, allowed, "port", "method", "why", "bytes_up", "bytes_down")
}

// TestEgressStepNoNetwork: a run without the allowlist network has no
// proxy: nothing is started and there is no socket.
func TestEgressStepNoNetwork(t *testing.T) {
	r, l := stepRun(t, t.TempDir(), "")
	s := &egressStep{Record: r, Layout: l, StartProxy: func(context.Context, *run.Run, string, func(string) string, func(egress.Record)) (func(context.Context) error, error) {
		t.Fatal("the proxy was started")
		return nil, nil
	}}
	if err := s.Start(context.Background()); err != nil || s.Socket() != "" {
		t.Fatalf("%v %q", err, s.Socket())
	}
	s.Stop(context.Background())
}

func TestEgressStepStopWithoutStart(t *testing.T) {
	s := &egressStep{}
	s.Stop(context.Background())
	s.Stop(context.Background())
}

// TestEgressStepMissingProxy: asked for the allowlist without a proxy in
// the build, Start fails rather than run the sandbox without it.
func TestEgressStepMissingProxy(t *testing.T) {
	r, l := stepRun(t, t.TempDir(), "")
	r.Sandbox.Network = string(sandbox.NetworkAllowlist)
	s := &egressStep{Record: r, Layout: l}
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "egress proxy") {
		t.Fatalf("err %v", err)
	}
	s.Stop(context.Background())
}
