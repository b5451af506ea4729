package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/agentrun/agentrun/internal/server"
)

// TestReadyz: /readyz is 503 with the reason while the database does not
// answer (or its schema is not this build's), /healthz 200 all the same.
func TestReadyz(t *testing.T) {
	down := errors.New("connect to PostgreSQL database: connection refused")
	s := server.New(server.Options{Ready: func(context.Context) error { return down }, Log: slog.New(slog.DiscardHandler)})
	for path, want := range map[string]int{"/readyz": 503, "/healthz": 200} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1:8080"
		s.Handler().ServeHTTP(rec, req)
		a := answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		conforms(t, "GET", path, a)
		if a.status != want {
			t.Errorf("%s: %d %s, want %d", path, a.status, a.body, want)
		}
		if path == "/readyz" && a.doc(t)["error"] != down.Error() {
			t.Errorf("/readyz does not say why: %s", a.body)
		}
	}
}
