package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
)

// answer serves one status and body for every request.
func answer(t *testing.T, status int, body string) *Endpoint {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-key") != "k" {
			t.Errorf("headers not sent: %v", r.Header)
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return &Endpoint{Base: srv.URL, Headers: map[string]string{"x-key": "k"}, Retry: Retry{Attempts: 1}}
}

func testWire() Wire {
	return Wire{
		Path: "/chat", What: "test request",
		Encode: func(Request) ([]byte, error) { return []byte(`{}`), nil },
		Decode: func(b []byte) (*Response, error) { return &Response{Message: Message{Content: string(b)}}, nil },
		Models: func(context.Context) ([]ModelInfo, error) { return []ModelInfo{{ID: "other"}}, nil },
	}
}

func TestEndpointChatClassifies(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		mod      func(*Wire)
		want     catalog.Entry
		contains string
	}{
		{"auth", 401, "no", nil, catalog.ModelAuth, "the server answered Unauthorized"},
		{"auth hint", 403, "no", func(w *Wire) { w.AuthHint = " and no key is set" }, catalog.ModelAuth, "Forbidden and no key is set"},
		{"model missing", 404, `{"error":"model x not found"}`, nil, catalog.ModelNotLoaded, "the server offers: other"},
		{"plain 404", 404, "page not found", nil, catalog.ModelProtocol, "http 404: page not found"},
		{"plain 404 as model", 404, "page not found", func(w *Wire) { w.NotFoundIsModel = true }, catalog.ModelNotLoaded, "other"},
		{"protocol", 400, long, nil, catalog.ModelProtocol, "http 400: xxx"},
		{"gateway could not reach the server", 502, `{"error":{"message":"agentrun gateway: the model server http://127.0.0.1:9 could not be reached: connection refused","type":"server_error"}}`,
			nil, catalog.ModelUnreachable, "the model server http://127.0.0.1:9 could not be reached: connection refused"},
		{"another 502", 502, "bad gateway", nil, catalog.ModelProtocol, "http 502: bad gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWire()
			if tc.mod != nil {
				tc.mod(&w)
			}
			_, err := answer(t, tc.status, tc.body).Chat(context.Background(), Request{Model: "m"}, w)
			if !catalog.Has(err, tc.want) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("%v", err)
			}
			if len(err.Error()) > 700 {
				t.Fatalf("message not clipped: %d bytes", len(err.Error()))
			}
		})
	}
}

// TestSendHonoursShouldRetry: an answer that says x-should-retry: false
// (the model gateway's, the providers' APIs') is not tried again.
func TestSendHonoursShouldRetry(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path == "/final" {
			w.Header().Set("x-should-retry", "false")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	policy := Retry{Attempts: 3, Base: time.Millisecond}
	if _, err := Send(context.Background(), nil, policy, http.MethodGet, srv.URL+"/final", nil, nil); err == nil || n.Load() != 1 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
	n.Store(0)
	if _, err := Send(context.Background(), nil, policy, http.MethodGet, srv.URL+"/again", nil, nil); err == nil || n.Load() != 3 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
}

func TestEndpointChatDecodesAndEncodeFails(t *testing.T) {
	e := answer(t, 200, `{"ok":1}`)
	r, err := e.Chat(context.Background(), Request{}, testWire())
	if err != nil || r.Message.Content != `{"ok":1}` {
		t.Fatalf("%+v %v", r, err)
	}
	w := testWire()
	w.Encode = func(Request) ([]byte, error) { return nil, errors.New("boom") }
	if _, err := e.Chat(context.Background(), Request{}, w); !catalog.Has(err, catalog.Internal) || !strings.Contains(err.Error(), "encode test request") {
		t.Fatalf("%v", err)
	}
}

func TestEndpointOnceDoesNotRetry(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	e := &Endpoint{Base: srv.URL, Retry: Retry{Attempts: 5}}
	var he *HTTPError
	if _, err := e.Once(context.Background(), http.MethodGet, srv.URL+"/models", nil); !errors.As(err, &he) || he.Status != 503 || n.Load() != 1 {
		t.Fatalf("%v after %d tries", err, n.Load())
	}
}
