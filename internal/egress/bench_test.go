package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// BenchmarkConnectLatency measures the latency the proxy adds to opening a
// connection: per iteration it opens one direct TCP connection to a
// loopback echo server and one CONNECT tunnel to it through the proxy's
// unix socket (a name resolved by an injected resolver, then decided), and
// times each up to the first echoed byte. It reports the p50 of both and
// of their difference; the target is p50-added-us <= 1000.
func BenchmarkConnectLatency(b *testing.B) {
	port := strconv.Itoa(testsupport.EchoTCP(b))
	al, err := NewAllowlist([]string{"echo.test:" + port, "127.0.0.1:" + port})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	sock := filepath.Join(dir, "p.sock")
	if len(sock) > 100 {
		sock = filepath.Join("/tmp", fmt.Sprintf("egress-bench-%d.sock", time.Now().UnixNano()))
	}
	p := NewProxy(ProxyOptions{
		Socket: sock,
		Policy: al,
		Resolver: func(context.Context, string) ([]net.IP, error) {
			return []net.IP{net.IPv4(127, 0, 0, 1)}, nil
		},
		OnRecord: func(Record) {},
	})
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer p.Stop(context.Background())

	one := []byte{'x'}
	buf := make([]byte, 1)
	direct := func() time.Duration {
		t0 := time.Now()
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			b.Fatal(err)
		}
		c.Write(one)
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		c.Close()
		return d
	}
	req := []byte("CONNECT echo.test:" + port + " HTTP/1.1\r\nHost: echo.test:" + port + "\r\n\r\n")
	proxied := func() time.Duration {
		t0 := time.Now()
		c, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		c.Write(req)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v", err)
		}
		c.Write(one)
		if _, err := io.ReadFull(br, buf); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		c.Close()
		return d
	}
	ds := make([]time.Duration, 0, b.N)
	ps := make([]time.Duration, 0, b.N)
	added := make([]time.Duration, 0, b.N)
	for b.Loop() {
		d := direct()
		pr := proxied()
		ds, ps, added = append(ds, d), append(ps, pr), append(added, pr-d)
	}
	b.StopTimer()
	p50 := func(v []time.Duration) float64 {
		slices.Sort(v)
		return float64(v[len(v)/2].Nanoseconds()) / 1e3
	}
	p99 := func(v []time.Duration) float64 {
		slices.Sort(v)
		return float64(v[len(v)*99/100].Nanoseconds()) / 1e3
	}
	b.ReportMetric(p50(ds), "p50-direct-us")
	b.ReportMetric(p50(ps), "p50-proxy-us")
	b.ReportMetric(p50(added), "p50-added-us")
	b.ReportMetric(p99(added), "p99-added-us")
}
