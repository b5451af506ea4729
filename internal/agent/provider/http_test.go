package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
)

func TestSendHonoursRetryAfterWithinCap(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(429)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	start := time.Now()
	b, err := Send(context.Background(), nil, Retry{Attempts: 2, Base: time.Millisecond, Max: 50 * time.Millisecond}, "POST", srv.URL, nil, []byte(`{}`))
	if err != nil || string(b) != "{}" {
		t.Fatalf("%v %s", err, b)
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > 5*time.Second {
		t.Fatalf("waited %v; want the capped Retry-After", d)
	}
}

func TestSendStopsOnCancelDuringBackoff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Send(ctx, nil, Retry{Attempts: 5, Base: time.Hour, Max: time.Hour}, "GET", srv.URL, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

func TestSendUnreachableNamesNoKey(t *testing.T) {
	_, err := Send(context.Background(), nil, Retry{Attempts: 2, Base: time.Millisecond, Max: time.Millisecond}, "POST",
		"http://127.0.0.1:1/v1/chat/completions", map[string]string{"Authorization": "Bearer sk-secret"}, []byte(`{}`))
	if !catalog.Has(err, catalog.ModelUnreachable) {
		t.Fatalf("%v", err)
	}
	ce, _ := catalog.As(err)
	if s := ce.Error() + ce.Fix; contains(s, "sk-secret") {
		t.Fatal("key in error")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
