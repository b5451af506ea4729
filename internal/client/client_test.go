package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
)

func codeOf(t *testing.T, err error) *catalog.Error {
	t.Helper()
	ce, ok := catalog.As(err)
	if !ok {
		t.Fatalf("not a catalog error: %v", err)
	}
	return ce
}

// The server's catalog errors come back as they were sent, with an exit
// status the catalog knows; what is not the API is server_protocol.
func TestAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/runs/abc":
			if r.Header.Get("Authorization") != "Bearer tok" {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error": {"code": "unauthorized", "error": "the request carries no valid token", "exit_code": 2}}`))
				return
			}
			w.Header().Add("Agentrun-Warning", "a note")
			_, _ = w.Write([]byte(`{"id": "abc"}`))
		case "/v1/runs/odd":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": {"code": "run_not_found", "error": "run not found", "exit_code": 99}}`))
		default:
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>a proxy</html>"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	c, err := New(srv.URL+"/", "tok")
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	c.Warn = func(m string) { warned = append(warned, m) }
	doc, err := c.Get(ctx, "/v1/runs/abc", nil)
	if err != nil || string(doc) != `{"id": "abc"}` || len(warned) != 1 || warned[0] != "a note" {
		t.Errorf("doc %s, err %v, warnings %v", doc, err, warned)
	}

	anon, _ := New(srv.URL, "")
	_, err = anon.Get(ctx, "/v1/runs/abc", nil)
	if ce := codeOf(t, err); ce.Code != "unauthorized" || ce.Exit != 2 || !strings.Contains(ce.Fix, "--token-file") {
		t.Errorf("no token: %+v", ce)
	}
	_, err = c.Get(ctx, "/v1/runs/odd", nil)
	if ce := codeOf(t, err); ce.Code != "run_not_found" || ce.Exit != catalog.ExitInternal {
		t.Errorf("an exit status the catalog does not know: %+v", ce)
	}
	_, err = c.Get(ctx, "/elsewhere", nil)
	if ce := codeOf(t, err); ce.Code != catalog.ServerProtocol.Code {
		t.Errorf("not the API: %+v", ce)
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://x", "http://", "http://h/?q=1"} {
		if _, err := New(bad, ""); codeOf(t, err).Code != "usage" {
			t.Errorf("New(%q): %v", bad, err)
		}
	}
}

// Nothing listening is server_unreachable; a certificate not trusted, or
// https:// to a plain server, server_tls.
func TestTransportErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	c, _ := New("http://"+down, "")
	if _, err := c.Get(ctx, "/v1/runs", nil); codeOf(t, err).Code != catalog.ServerUnreachable.Code {
		t.Errorf("down: %v", err)
	}
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	c, _ = New(tlsSrv.URL, "")
	if _, err := c.Get(ctx, "/v1/runs", nil); codeOf(t, err).Code != catalog.ServerTLS.Code {
		t.Errorf("untrusted: %v", err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	c, _ = New(strings.Replace(plain.URL, "http://", "https://", 1), "")
	if _, err := c.Get(ctx, "/v1/runs", nil); codeOf(t, err).Code != catalog.ServerTLS.Code {
		t.Errorf("https to plain: %v", err)
	}
}

// A stream that breaks is picked up from its last event id: each event
// is seen once, and the stream ends with its end event; an error event
// ends it with the server's error.
func TestStreamResumes(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		if strings.HasSuffix(r.URL.Path, "/bad/logs/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: error\ndata: {\"error\": {\"code\": \"internal\", \"error\": \"internal error\", \"exit_code\": 70}}\n\n")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch last := r.Header.Get("Last-Event-ID"); {
		case n == 1 && last == "":
			fmt.Fprint(w, ": waiting\n\nid: 1.0.0\nevent: event\ndata: {\"seq\": 1}\n\n")
			// The connection ends here, mid-run.
		case last == "1.0.0":
			fmt.Fprint(w, "id: 2.0.0\nevent: event\ndata: {\"seq\": 2}\n\nevent: end\ndata: {\"id\": \"abc\", \"status\": \"succeeded\"}\n\n")
		default:
			t.Errorf("connection %d with Last-Event-ID %q", n, last)
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "")
	var got []string
	err := c.Stream(context.Background(), "abc", nil, func(ev Event) error {
		var v map[string]any
		_ = json.Unmarshal(ev.Data, &v)
		got = append(got, fmt.Sprintf("%s %v", ev.Name, v))
		return nil
	})
	want := []string{"event map[seq:1]", "event map[seq:2]", "end map[id:abc status:succeeded]"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, err %v", got, err)
	}
	err = c.Stream(context.Background(), "bad", nil, func(Event) error { return nil })
	if ce := codeOf(t, err); ce.Code != "internal" || ce.Exit != catalog.ExitInternal {
		t.Errorf("error event: %+v", ce)
	}
}

// A burst of calls at once, as an agent host makes them (its claim's long
// poll, its heartbeat's wait, a run's write and its events), finds the
// connections of the burst before it still open: the second burst dials
// none. With the transport's default of two idle connections, all but two
// were closed after the first burst and dialled again.
func TestBurstsReuseConnections(t *testing.T) {
	t.Parallel()
	const burst = 6
	var conns atomic.Int64
	release := make(chan struct{})
	var arrived atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	round := func() {
		arrived.Store(0)
		release = make(chan struct{})
		errs := make(chan error, burst)
		for range burst {
			go func() {
				_, err := c.Get(context.Background(), "/v1/x", nil)
				errs <- err
			}()
		}
		// All of them at once on the server before any is answered.
		for arrived.Load() < burst {
			runtime.Gosched()
		}
		close(release)
		for range burst {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	if n := conns.Load(); n != burst {
		t.Fatalf("the first burst of %d calls made %d connections", burst, n)
	}
	round()
	if n := conns.Load(); n != burst {
		t.Errorf("the second burst of %d calls dialled %d connections more: the first burst's were closed", burst, n-burst)
	}
}
