package submit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// TestProfileModelCheck: each route family asks its model list in its
// own protocol with the key; a pass is remembered (never the key), so
// that the next submit asks nothing; a refusal is not.
func TestProfileModelCheck(t *testing.T) {
	const key = "sk-probe-" + "secret"
	var asked atomic.Int32
	refuse := atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		got := r.Header.Get("x-api-key") + r.Header.Get("x-goog-api-key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if refuse.Load() || got != key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1beta/models":
			w.Write([]byte(`{"models":[{"name":"models/m1"}]}`))
		case "/v1/models":
			w.Write([]byte(`{"object":"list","data":[{"id":"m1","object":"model"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	svc := &Service{Providers: all.Providers(), CachePreflight: true}
	env := map[string]string{"HOME": t.TempDir(), "XDG_CACHE_HOME": cache, "SERVER_KEY": key}
	req := Request{Getenv: func(k string) string { return env[k] }}
	for _, family := range []string{"openai", "anthropic", "gemini"} {
		t.Run(family, func(t *testing.T) {
			rs := run.RouteSpec{Name: family, URL: srv.URL, Server: "local", Keys: []run.KeySource{{Env: "SERVER_KEY", Header: "authorization"}}}
			ctx := context.Background()
			asked.Store(0)
			if err := svc.profileModelCheck(ctx, req, "missing", rs)(); !catalog.Has(err, catalog.ModelNotLoaded) || !strings.Contains(err.Error(), "m1") {
				t.Fatalf("missing model: %v", err)
			}
			refuse.Store(true)
			if err := svc.profileModelCheck(ctx, req, "m1", rs)(); !catalog.Has(err, catalog.ModelAuth) {
				t.Fatalf("refused key: %v", err)
			}
			refuse.Store(false)
			if err := svc.profileModelCheck(ctx, req, "m1", rs)(); err != nil {
				t.Fatal(err)
			}
			if err := svc.profileModelCheck(ctx, req, "m1", rs)(); err != nil || asked.Load() != 3 {
				t.Fatalf("%v; the server was asked %d times, want 3 (the pass remembered)", err, asked.Load())
			}
			// Stale: asked again.
			memo, _ := modelCheckMemo(rs, "m1", cache)
			old := time.Now().Add(-modelCheckTTL - time.Second)
			if err := os.Chtimes(memo, old, old); err != nil {
				t.Fatal(err)
			}
			if err := svc.profileModelCheck(ctx, req, "m1", rs)(); err != nil || asked.Load() != 4 {
				t.Fatalf("%v; asked %d times after the memo went stale", err, asked.Load())
			}
		})
	}
	// The memos name where the key comes from, never the key.
	memos, _ := filepath.Glob(filepath.Join(cache, "agentrun", "model-*"))
	if len(memos) != 3 {
		t.Fatalf("memos %v", memos)
	}
	for _, m := range memos {
		b, _ := os.ReadFile(m)
		if strings.Contains(string(b), key) || !strings.Contains(string(b), "SERVER_KEY") {
			t.Fatalf("%s: %q", m, b)
		}
	}
	// A provider's API is never asked.
	asked.Store(0)
	if err := svc.profileModelCheck(context.Background(), req, "x", run.RouteSpec{Name: "openai", URL: srv.URL})(); err != nil || asked.Load() != 0 {
		t.Fatalf("%v, asked %d", err, asked.Load())
	}
}
