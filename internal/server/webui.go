package server

import (
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/server/web"
)

// mountUI serves the web UI under /ui/ (a browser asking for / is sent
// there). The UI renders the API's own answers: it calls the routes'
// handlers in process, past wrap (its own request was authenticated).
func (s *Server) mountUI() {
	api := http.NewServeMux()
	for _, rt := range s.routes {
		h := rt.h
		// What a browser changes is audited as what a client changes.
		if action, ok := auditedRoutes[rt.method+" "+rt.path]; ok {
			h = func(w http.ResponseWriter, r *http.Request) { s.audited(action, rt, &recorder{ResponseWriter: w}, r) }
		}
		// ... and the UI reaches only what its signed-in user may.
		inner := h
		h = func(w http.ResponseWriter, r *http.Request) {
			if r, ok := s.gate(w, r, rt); ok {
				inner(w, r)
			}
		}
		api.HandleFunc(rt.method+" "+rt.path, h)
	}
	s.ui = web.New(web.Options{API: api, NeedLogin: s.o.Token != "", Check: s.tokenIdentity, Users: s.o.Users != nil, Audit: s.o.Audit != nil,
		Projects: s.o.Projects.names, Log: s.o.Log})
	s.mux.Handle("/ui/", s.wrap(route{path: "/ui/", ui: true, h: s.ui.ServeHTTP}))
	s.mux.Handle("GET /{$}", s.wrap(route{path: "/", ui: true, h: func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.Header.Get("Accept"), "text/html"):
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		case !web.ViewerOf(r.Context()).OK:
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentrun"`)
			writeError(w, catalog.Unauthorized.New("%s %s", r.Method, r.URL.Path))
		default:
			writeError(w, catalog.NoRoute.New("%s %s", r.Method, r.URL.Path))
		}
	}}))
}

// names lists the projects that have a repository, for the submit form.
func (p *Projects) names() []string {
	ents, _ := os.ReadDir(p.Dir)
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".git"); ok && e.IsDir() && projectName.MatchString(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// has reports whether project name has a repository on the server.
func (p *Projects) has(name string) bool {
	if !projectName.MatchString(name) {
		return false
	}
	_, err := os.Stat(p.Repo(name) + "/objects")
	return err == nil
}
