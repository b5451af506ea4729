package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/mcp"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server/web"
	"github.com/agentrun/agentrun/internal/users"
)

// Options configure a Server.
type Options struct {
	// Exec runs one agentrun command line in process against the server's
	// data directory, store and coordinator (required).
	Exec mcp.Exec
	// Store is the server's run store, read for the bundle route.
	Store run.Store
	// Projects keeps the project repositories (required).
	Projects *Projects
	// Ready reports whether the server can serve: the database answers
	// and its schema is current (nil: always ready).
	Ready func(ctx context.Context) error
	// Submitted, when set, is told that run id was queued (by submit or
	// resume): its dispatch job is inserted then.
	Submitted func(ctx context.Context, id string)
	// Metrics are served at /metrics (nil: no metrics).
	Metrics *Metrics
	// Isolates reports whether the sandbox backend called name isolates
	// anything (nil: all do).
	Isolates func(name string) bool
	// AllowUnisolated lets clients ask for a backend that isolates nothing
	// (host): their agent commands then run as the server's user.
	AllowUnisolated bool
	// PassEnv are the names of the server's variables a client may pass
	// to its agent (the spec's env); no other.
	PassEnv []string
	// Token, when set, must come as "Authorization: Bearer TOKEN" with
	// every request but /healthz and /readyz.
	Token string
	// Audit is the audit trail: every state-changing request is appended
	// to it (nil: none kept, the audit routes answer an error).
	Audit audit.Log
	// AuditKey is the public key that verifies the trail's checkpoints,
	// served at /v1/audit/key.
	AuditKey ed25519.PublicKey
	// Actor names who made a request, for the audit trail (nil, or "":
	// "token" on a server with a token, else "anonymous").
	Actor func(*http.Request) string
	// Users are the server's users and tokens (nil: the bootstrap token
	// only); Quota are the users' default quotas.
	Users users.Store
	Quota users.Limits
	// Attempts is the server's default attempts (config), held to the
	// per-run maximum.
	Attempts int
	// Policy is the organization policy in force, served at /v1/policy
	// (the zero PolicyDoc: none).
	Policy PolicyDoc
	// Hosts, when set, is the registry of agent hosts: their routes under
	// /v1/hosts are served, authenticated by the hosts' credentials.
	Hosts *Hosts
	Log   *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	o       Options
	mux     *http.ServeMux
	handler http.Handler
	routes  []route

	stopOnce sync.Once
	stopping chan struct{} // closed when shutdown begins: streams end

	ui *web.UI // the web UI under /ui/ (webui.go)
}

// route is one registered route.
type route struct {
	method, path string
	open         bool // served without the token (probes)
	ui           bool // a web UI route: it sees who asked and decides itself
	h            http.HandlerFunc
}

// New returns a server with its routes registered.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Server{o: o, mux: http.NewServeMux(), stopping: make(chan struct{})}
	s.routes = []route{
		{method: "GET", path: "/healthz", open: true, h: s.healthz},
		{method: "GET", path: "/readyz", open: true, h: s.readyz},
		{method: "GET", path: "/metrics", h: s.metrics},
		{method: "GET", path: "/v1/openapi.json", h: s.openapi},
		{method: "POST", path: "/v1/runs", h: s.submit},
		{method: "GET", path: "/v1/runs", h: s.list},
		{method: "GET", path: "/v1/runs/{id}", h: s.status},
		{method: "GET", path: "/v1/runs/{id}/logs", h: s.logs},
		{method: "GET", path: "/v1/runs/{id}/logs/stream", h: s.stream},
		{method: "GET", path: "/v1/runs/{id}/result", h: s.result},
		{method: "GET", path: "/v1/runs/{id}/diff", h: s.diff},
		{method: "GET", path: "/v1/runs/{id}/bundle", h: s.bundle},
		{method: "GET", path: "/v1/runs/{id}/egress", h: s.egress},
		{method: "POST", path: "/v1/runs/{id}/cancel", h: s.cancel},
		{method: "POST", path: "/v1/runs/{id}/resume", h: s.resume},
		{method: "POST", path: "/v1/runs/{id}/verdict", h: s.verdict},
		{method: "GET", path: "/v1/audit", h: s.auditList},
		{method: "GET", path: "/v1/audit/checkpoints", h: s.auditCheckpoints},
		{method: "GET", path: "/v1/audit/key", h: s.auditKey},
		{method: "GET", path: "/v1/audit/export", h: s.auditExport},
		{method: "GET", path: "/v1/policy", h: s.policyShow},
		{method: "GET", path: "/v1/projects/{name}/commits", h: s.projectCommits},
	}
	s.routes = append(s.routes, s.userRoutes()...)
	s.routes = append(s.routes, s.hostRoutes()...)
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	s.mountUI()
	s.mux.Handle("/", s.wrap(route{path: "/", h: func(w http.ResponseWriter, r *http.Request) {
		writeError(w, catalog.NoRoute.New("%s %s", r.Method, r.URL.Path))
	}}))
	// A web page the user visits must not drive the server: a form post
	// to 127.0.0.1 needs no preflight.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, catalog.CrossOrigin.New("%s %s from %s", r.Method, r.URL.Path, r.Header.Get("Origin")))
	}))
	s.handler = cop.Handler(s.mux)
	return s
}

// Routes lists the registered routes as "METHOD PATH" (the OpenAPI
// document must describe each).
func (s *Server) Routes() []string {
	var out []string
	for _, rt := range s.routes {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// Handler is the API.
func (s *Server) Handler() http.Handler { return s.handler }

// recorder remembers the status written, for the log and the metrics.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets a stream through the recorder.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// wrap adds what every route has: the token check, panic recovery, the
// request log and the request metrics.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		began := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.o.Log.Error("panic", "path", req.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, catalog.Internal.New("panic: %v", p))
				}
			}
			took := time.Since(began)
			s.o.Metrics.request(req.Method, rt.path, rec.status, took)
			s.o.Log.Info("request", "method", req.Method, "path", req.URL.Path, "route", rt.path,
				"status", rec.status, "duration_ms", float64(took.Microseconds())/1000, "remote", req.RemoteAddr)
		}()
		if s.o.Token == "" && !loopbackName(req.Host) {
			// Without a token the server listens on loopback only; a
			// request naming another host reached it by DNS rebinding.
			writeError(rec, catalog.CrossOrigin.New("a request for host %q reached a server that answers loopback names only", req.Host))
			return
		}
		if rt.ui {
			// A session cookie stands for a browser on the UI's pages
			// only; the API takes bearer tokens.
			p, err := s.authenticate(req, true)
			ctx := req.Context()
			if err == nil {
				ctx = WithPrincipal(ctx, p)
			}
			v := web.Viewer{Name: p.Name, Role: string(p.Role), Admin: p.Can(users.ScopeAdmin), Write: p.Can(users.ScopeRunsWrite), OK: err == nil}
			rt.h(rec, req.WithContext(web.WithViewer(ctx, v)))
			return
		}
		if !rt.open {
			var ok bool
			if req, ok = s.gate(rec, req, rt); !ok {
				return
			}
		}
		if action, ok := auditedRoutes[rt.method+" "+rt.path]; ok {
			s.audited(action, rt, rec, req)
			return
		}
		rt.h(rec, req)
	})
}

// loopbackName reports whether a Host header names this machine.
func loopbackName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ShutdownTimeout bounds how long Serve waits for in-flight requests
// once it is told to stop.
const ShutdownTimeout = 30 * time.Second

// Serve serves on ln until ctx ends, then stops accepting, ends the log
// streams and waits for the requests in flight (at most ShutdownTimeout).
// With cert and key it serves TLS.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert, key string) error {
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.o.Log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() {
		if cert != "" {
			errc <- hs.ServeTLS(ln, cert, key)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.stopOnce.Do(func() { close(s.stopping) })
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
