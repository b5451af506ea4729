package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/users"
)

// Principal is who made a request: the user, their role, and the scopes
// the request may use (the token's, within the role's).
type Principal struct {
	UserID string
	Name   string
	Role   users.Role
	Scopes []string
	// TokenID is the personal token used ("" for the server's bootstrap
	// token and for a tokenless loopback server's caller).
	TokenID string
}

// Can reports whether the principal may use scope.
func (p Principal) Can(scope string) bool { return slices.Contains(p.Scopes, scope) }

// ReadsAll reports whether the principal sees every user's runs (admins
// and viewers; members see their own).
func (p Principal) ReadsAll() bool { return p.Role == users.Admin || p.Role == users.Viewer }

// Owns reports whether the principal may act on r as on its own: an
// admin on any run, anyone else on the runs they submitted.
func (p Principal) Owns(r *run.Run) bool {
	return p.Role == users.Admin || r.SubmittedBy != nil && r.SubmittedBy.ID == p.UserID
}

type principalKey struct{}

// PrincipalFrom returns the authenticated principal of the request whose
// context is ctx (ok false outside a request of this server).
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// WithPrincipal returns ctx carrying p (tests, and commands run for a
// request).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// builtin is the principal of a built-in admin user.
func builtin(id, name string) Principal {
	return Principal{UserID: id, Name: name, Role: users.Admin, Scopes: users.AllScopes}
}

// authenticate is the one place that decides who made a request: the
// bootstrap admin (the --token-file token), a user by a personal token,
// or, on a server without a token, the loopback caller as the local
// admin. The token comes as a bearer token or, on the web UI's pages
// (ui), from the session cookie, whose token is looked up again on every
// request: a token that stops being good ends its sessions too.
func (s *Server) authenticate(req *http.Request, ui bool) (Principal, error) {
	got, bearer := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !bearer && ui && s.ui != nil {
		got, bearer = s.ui.SessionToken(req)
	}
	got = strings.TrimSpace(got)
	if s.o.Token != "" && bearer && subtle.ConstantTimeCompare([]byte(got), []byte(s.o.Token)) == 1 {
		return builtin(users.BootstrapID, users.BootstrapName), nil
	}
	if bearer && s.o.Users != nil && strings.HasPrefix(got, users.TokenPrefix) {
		return s.byToken(req.Context(), got)
	}
	if s.o.Token == "" {
		return builtin(users.LocalID, users.LocalName), nil
	}
	return Principal{}, catalog.Unauthorized.New("%s %s", req.Method, req.URL.Path)
}

// tokenIdentity looks a token up for the web UI's sign-in: the name of
// its principal, if it is good.
func (s *Server) tokenIdentity(tok string) (string, bool) {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if s.o.Token == "" && !strings.HasPrefix(tok, users.TokenPrefix) {
		return "", false
	}
	p, err := s.authenticate(req, false)
	return p.Name, err == nil
}

func (s *Server) byToken(ctx context.Context, secret string) (Principal, error) {
	u, t, err := s.o.Users.Authenticate(ctx, secret)
	switch {
	case errors.Is(err, users.ErrBadToken):
		return Principal{}, catalog.Unauthorized.New("the token is not one of this server's").
			WithFix("check the token (agentrun login --server URL again), or ask an admin for one")
	case errors.Is(err, users.ErrExpired):
		return Principal{}, catalog.TokenExpired.New("token %s (%s) of %s expired at %s", t.ID, t.Name, u.Name, t.ExpiresAt.Format("2006-01-02 15:04:05Z"))
	case errors.Is(err, users.ErrRevoked):
		return Principal{}, catalog.TokenRevoked.New("token %s (%s) of %s was revoked at %s", t.ID, t.Name, u.Name, t.RevokedAt.Format("2006-01-02 15:04:05Z"))
	case errors.Is(err, users.ErrDisabled):
		return Principal{}, catalog.UserDisabled.New("user %s is disabled", u.Name)
	case err != nil:
		return Principal{}, err
	}
	var scopes []string
	for _, sc := range t.Scopes {
		if slices.Contains(users.RoleScopes(u.Role), sc) {
			scopes = append(scopes, sc)
		}
	}
	return Principal{UserID: u.ID, Name: u.Name, Role: u.Role, Scopes: scopes, TokenID: t.ID}, nil
}

// forbidden is the error of a request the principal may not make.
func forbidden(p Principal, what, scope string) error {
	why := "the token lacks the scope " + scope
	if !slices.Contains(users.RoleScopes(p.Role), scope) {
		why = "a " + string(p.Role) + " may not"
	}
	return catalog.Forbidden.New("%s: %s (user %s, role %s)", what, why, p.Name, p.Role)
}

// gate authenticates a request and checks what its route needs: a run
// route needs runs:read (GET) or runs:write, and a member reaches only
// their own runs: another's answers as a run that does not exist. It
// returns the request with the principal in its context, and the run's
// full id in place of a prefix.
func (s *Server) gate(w http.ResponseWriter, req *http.Request, rt route) (*http.Request, bool) {
	// The web UI's calls of the routes come authenticated already.
	p, ok := PrincipalFrom(req.Context())
	var err error
	if !ok {
		p, err = s.authenticate(req, false)
	}
	if err != nil {
		if e, ok := catalog.As(err); ok && e.Code == catalog.Unauthorized.Code {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentrun"`)
		}
		writeError(w, err)
		return req, false
	}
	req = req.WithContext(WithPrincipal(req.Context(), p))
	if strings.HasPrefix(rt.path, "/v1/audit") && !p.Can(users.ScopeAdmin) {
		// The trail names every user's runs and requests.
		writeError(w, forbidden(p, req.Method+" "+rt.path, users.ScopeAdmin))
		return req, false
	}
	// A project's commits are the runs' bases and branches: read as runs are.
	if !strings.HasPrefix(rt.path, "/v1/runs") && !strings.HasPrefix(rt.path, "/v1/projects") {
		return req, true
	}
	scope := users.ScopeRunsWrite
	if req.Method == http.MethodGet {
		scope = users.ScopeRunsRead
	}
	if !p.Can(scope) {
		writeError(w, forbidden(p, req.Method+" "+rt.path, scope))
		return req, false
	}
	if id := req.PathValue("id"); id != "" {
		full, err := s.visible(req.Context(), p, id)
		if err != nil {
			writeError(w, err)
			return req, false
		}
		req.SetPathValue("id", full)
	}
	return req, true
}

// visible is the full id of the run id names if p may see it; a run of
// another user is not found, as one that does not exist, so that a member
// learns nothing of others' runs, not even their ids.
func (s *Server) visible(ctx context.Context, p Principal, id string) (string, error) {
	if p.ReadsAll() || s.o.Store == nil {
		return id, nil
	}
	notFound := catalog.RunNotFound.New("run %s", id)
	full, err := s.o.Store.Resolve(ctx, id)
	switch {
	case errors.Is(err, run.ErrAmbiguous):
		// The prefix may be unique among the member's own runs.
		return s.ownPrefix(ctx, p, id, notFound)
	case errors.Is(err, run.ErrNotFound):
		return "", notFound
	case err != nil:
		// (A malformed id: the command says what is wrong with it.)
		return id, nil
	}
	r, err := s.o.Store.Get(ctx, full)
	if errors.Is(err, run.ErrNotFound) {
		return "", notFound
	}
	if err != nil {
		return "", err
	}
	if !p.Owns(r) {
		return "", notFound
	}
	return full, nil
}

func (s *Server) ownPrefix(ctx context.Context, p Principal, prefix string, notFound error) (string, error) {
	runs, _, err := s.o.Store.List(ctx, run.Filter{})
	if err != nil {
		return "", err
	}
	var match []string
	for _, r := range runs {
		if strings.HasPrefix(r.ID, prefix) && p.Owns(r) {
			match = append(match, r.ID)
		}
	}
	switch len(match) {
	case 0:
		return "", notFound
	case 1:
		return match[0], nil
	}
	return "", catalog.AmbiguousID.New("%q matches %s", prefix, strings.Join(match, ", "))
}
