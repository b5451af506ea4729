package gateway

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedial: a request whose connection to the model server cannot be
// made is tried again, its whole body with it, while the server comes
// back within the waits (a local server restarting); past them the agent
// gets one 502, journaled once. A server that answered, even an error,
// is not asked again.
func TestRedial(t *testing.T) {
	delays := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}
	p := protoByName(t, "chat")

	t.Run("the server comes back", func(t *testing.T) {
		dead := deadURL(t)
		tg := startGateway(t, Options{Routes: testRoutes(dead), Redial: delays})
		var got atomic.Value
		go func() {
			time.Sleep(150 * time.Millisecond)
			ln, err := net.Listen("tcp", dead.Host)
			if err != nil {
				t.Error(err)
				return
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got.Store(string(b))
				modelAPI(nil)(w, r)
			})}
			t.Cleanup(func() { srv.Close() })
			srv.Serve(ln)
		}()
		resp, body := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if b, _ := got.Load().(string); !strings.Contains(b, `"content":"Hi"`) {
			t.Fatalf("the server got the body %q", b)
		}
		if ev := tg.events.kind("upstream_error"); len(ev) != 0 {
			t.Fatalf("events %+v", ev)
		}
	})
	t.Run("the server stays away", func(t *testing.T) {
		tg := startGateway(t, Options{Routes: testRoutes(deadURL(t)), Redial: delays})
		t0 := time.Now()
		resp, _ := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("x-should-retry") != "false" {
			t.Fatalf("status %d, x-should-retry %q", resp.StatusCode, resp.Header.Get("x-should-retry"))
		}
		if took := time.Since(t0); took < time.Second {
			t.Fatalf("answered after %s, before the waits (1 s) were over", took)
		}
		if ev := tg.events.kind("upstream_error"); len(ev) != 1 {
			t.Fatalf("%d upstream_error events", len(ev))
		}
	})
	t.Run("an answer is not asked again", func(t *testing.T) {
		var n atomic.Int32
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
		})
		tg := startGateway(t, Options{Routes: testRoutes(up.url), Redial: delays})
		if resp, _ := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body); resp.StatusCode != http.StatusInternalServerError || n.Load() != 1 {
			t.Fatalf("status %d after %d requests", resp.StatusCode, n.Load())
		}
	})
}
