package web

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the UI.
type Options struct {
	// API serves the server's /v1 routes in process, past authentication
	// (required): the UI renders its answers.
	API http.Handler
	// NeedLogin: the server takes tokens, so the UI asks for one.
	NeedLogin bool
	// Check looks an API token up, as the server's authentication does:
	// whom it names and whether it is good.
	Check func(token string) (name string, ok bool)
	// Projects lists the server's projects, offered by the submit form.
	Projects func() []string
	// Users: the server keeps users and tokens (the tokens page, and the
	// users page for admins); Audit: it keeps an audit trail (the audit
	// page for admins).
	Users, Audit bool
	// Admin are more nav entries, shown to admins only.
	Admin []Link
	// SessionTTL is how long a session lasts from sign-in (default 12h).
	SessionTTL time.Duration
	// Now is the clock (default time.Now; tests move it).
	Now func() time.Time
	Log *slog.Logger
}

// Link is one nav entry; Page is the page it is current on.
type Link struct{ Label, Path, Page string }

// DefaultSessionTTL is a session's lifetime when Options leave it zero.
const DefaultSessionTTL = 12 * time.Hour

// UI is the web UI's handler, mounted at /ui/.
type UI struct {
	o        Options
	mux      *http.ServeMux
	pages    map[string]*template.Template
	sessions *sessions
}

// Viewer is who asks, as the server decided: the signed-in principal.
type Viewer struct {
	Name string
	Role string // admin, member or viewer
	// Admin: the principal has the admin scope (the admin pages); Write:
	// it may change runs (the submit, cancel and verdict controls).
	Admin, Write bool
	OK           bool // authenticated (or no sign-in needed)
}

type viewerKey struct{}

// WithViewer tells the UI who made the request.
func WithViewer(ctx context.Context, v Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// ViewerOf is the viewer WithViewer set (the zero Viewer: nobody).
func ViewerOf(ctx context.Context) Viewer {
	v, _ := ctx.Value(viewerKey{}).(Viewer)
	return v
}

// New returns the UI with its pages parsed.
func New(o Options) *UI {
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Projects == nil {
		o.Projects = func() []string { return nil }
	}
	u := &UI{o: o, mux: http.NewServeMux(), sessions: newSessions(o.Now, o.SessionTTL), pages: parsePages()}
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	u.mux.Handle("GET /ui/static/", files)
	u.mux.HandleFunc("GET /ui/login", u.loginPage)
	u.mux.HandleFunc("POST /ui/login", u.login)
	u.mux.HandleFunc("POST /ui/logout", u.signedIn(u.logout))
	u.mux.HandleFunc("GET /ui/{$}", u.signedIn(u.listPage))
	u.mux.HandleFunc("GET /ui/runs/{id}", u.signedIn(u.runPage))
	u.mux.HandleFunc("GET /ui/runs/{id}/stream", u.signedIn(u.stream))
	u.mux.HandleFunc("POST /ui/runs/{id}/verdict", u.signedIn(u.verdict))
	u.mux.HandleFunc("POST /ui/runs/{id}/cancel", u.signedIn(u.cancel))
	u.mux.HandleFunc("GET /ui/submit", u.signedIn(u.submitPage))
	u.mux.HandleFunc("POST /ui/submit", u.signedIn(u.submit))
	u.adminRoutes()
	u.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		u.fail(w, r, http.StatusNotFound, "no such page", r.URL.Path, "")
	})
	return u
}

// csp allows the UI's own script, style and images only: no inline
// script or style, no eval, no framing, forms posting to itself only.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP serves the UI, every answer with its security headers.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/ui/static/") {
		h.Set("Cache-Control", "no-store")
	}
	u.mux.ServeHTTP(w, r)
}

// page is what every page's template gets.
type page struct {
	Title   string
	Viewer  Viewer
	Login   bool // sign-in is needed (a sign-out button is shown)
	CSRF    string
	Links   []Link // the nav entries past Runs and Submit
	Nav     string // the current nav entry
	Content any
}

// render writes template name with content.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name, title string, content any) {
	s := sessionOf(r.Context())
	v := ViewerOf(r.Context())
	p := page{Title: title, Viewer: v, Login: u.o.NeedLogin, Links: u.nav(v), Nav: name, Content: content}
	if s != nil {
		p.CSRF = s.csrf
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := u.pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		u.o.Log.Error("render", "page", name, "error", err.Error())
	}
}

// problem is an error page's content: a catalog error as the API
// answered it, or the UI's own.
type problem struct {
	Status                int
	What, Cause, Fix, Doc string
	Code                  string
}

func (u *UI) fail(w http.ResponseWriter, r *http.Request, status int, what, cause, fix string) {
	u.render(w, r, status, "error", what, problem{Status: status, What: what, Cause: cause, Fix: fix})
}

// failAPI shows an error answer of the API.
func (u *UI) failAPI(w http.ResponseWriter, r *http.Request, a answer) {
	e := a.problem()
	u.render(w, r, a.status, "error", e.What, e)
}

// nav are the nav entries the viewer's role reaches.
func (u *UI) nav(v Viewer) []Link {
	var out []Link
	if u.o.Users {
		out = append(out, Link{"Your tokens", "/ui/tokens", "tokens"})
	}
	if v.Admin && u.o.Users {
		out = append(out, Link{"Users", "/ui/users", "users"})
	}
	if v.Admin && u.o.Audit {
		out = append(out, Link{"Audit log", "/ui/audit", "audit"})
	}
	out = append(out, Link{"Policy", "/ui/policy", "policy"})
	if v.Admin {
		out = append(out, u.o.Admin...)
	}
	return out
}
