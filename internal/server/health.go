package server

import (
	"context"
	"net/http"

	"github.com/agentrun/agentrun/docs"
	"github.com/agentrun/agentrun/internal/catalog"
)

// Health is the document of /healthz and /readyz.
type Health struct {
	Status string `json:"status"` // ok | unavailable
	Error  string `json:"error,omitempty"`
}

// healthz answers while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeDoc(w, http.StatusOK, Health{Status: "ok"})
}

// readyz answers 200 while the database answers and its schema is the
// one this build migrates to, 503 otherwise (and once shutdown began).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.stopping:
		writeDoc(w, http.StatusServiceUnavailable, Health{Status: "unavailable", Error: "the server is shutting down"})
		return
	default:
	}
	if s.o.Ready != nil {
		if err := s.o.Ready(r.Context()); err != nil {
			writeDoc(w, http.StatusServiceUnavailable, Health{Status: "unavailable", Error: err.Error()})
			return
		}
	}
	writeDoc(w, http.StatusOK, Health{Status: "ok"})
}

// openapi serves the API document (docs/openapi.json).
func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(docs.OpenAPI)
}

// metrics serves the Prometheus metrics.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.o.Metrics == nil {
		writeError(w, catalog.NoRoute.New("this server keeps no metrics"))
		return
	}
	s.o.Metrics.handler.ServeHTTP(w, r)
}

// whileServing is ctx, ended by the server's shutdown too: the context of
// a long poll or a stream, which would otherwise hold the drain up.
func (s *Server) whileServing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
