package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/users"
)

// The users, tokens and quota routes. Their documents are in
// docs/json (users, user, tokens, token, me, quota).

// DefaultTokenExpiry is how long a token lives when its maker names no
// expiry.
const DefaultTokenExpiry = 90 * 24 * time.Hour

// UsersDoc is the answer of GET /v1/users.
type UsersDoc struct {
	Users []users.User `json:"users"`
}

// UserDoc is the answer about one user; Token and Secret come with a
// user just made (its first token, whose secret is shown this once).
type UserDoc struct {
	User   users.User   `json:"user"`
	Token  *users.Token `json:"token,omitempty"`
	Secret string       `json:"secret,omitempty"`
}

// TokensDoc is the answer of GET /v1/tokens.
type TokensDoc struct {
	Tokens []users.Token `json:"tokens"`
}

// TokenDoc is the answer about one token; Secret only when it was made.
type TokenDoc struct {
	Token  users.Token `json:"token"`
	Secret string      `json:"secret,omitempty"`
}

// MeDoc is the answer of GET /v1/me: who the token is.
type MeDoc struct {
	User   users.User   `json:"user"`
	Scopes []string     `json:"scopes"`
	Token  *users.Token `json:"token,omitempty"`
}

// QuotaDoc is the answer of GET /v1/quota: the caller's effective limits,
// usage and when the periods reset (UTC days and months).
type QuotaDoc struct {
	User        string       `json:"user"`
	Limits      users.Limits `json:"limits"`
	Usage       users.Usage  `json:"usage"`
	DayResets   time.Time    `json:"day_resets"`
	MonthResets time.Time    `json:"month_resets"`
}

// CreateUserRequest is the body of POST /v1/users.
type CreateUserRequest struct {
	Name string     `json:"name"`
	Role users.Role `json:"role"`
}

// CreateTokenRequest is the body of POST /v1/tokens. Scopes default to
// the caller's; ExpiresIn (a duration like 720h; "0": never) to 90 days.
// User names another user's token (admins).
type CreateTokenRequest struct {
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes,omitempty"`
	ExpiresIn string   `json:"expires_in,omitempty"`
	User      string   `json:"user,omitempty"`
}

// userRoutes are the routes of this file.
func (s *Server) userRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/me", h: s.me},
		{method: "GET", path: "/v1/quota", h: s.quota},
		{method: "GET", path: "/v1/users", h: s.admin(s.listUsers)},
		{method: "POST", path: "/v1/users", h: s.admin(s.createUser)},
		{method: "POST", path: "/v1/users/{name}/disable", h: s.admin(s.disableUser(true))},
		{method: "POST", path: "/v1/users/{name}/enable", h: s.admin(s.disableUser(false))},
		{method: "POST", path: "/v1/users/{name}/limits", h: s.admin(s.setLimits)},
		{method: "GET", path: "/v1/tokens", h: s.withUsers(s.listTokens)},
		{method: "POST", path: "/v1/tokens", h: s.withUsers(s.createToken)},
		{method: "POST", path: "/v1/tokens/{id}/revoke", h: s.withUsers(s.revokeToken)},
	}
}

// usersError turns the users store's errors into catalog errors.
func usersError(err error) error {
	switch {
	case errors.Is(err, users.ErrExists):
		return catalog.UserExists.Wrap(err, "%v", err)
	case errors.Is(err, users.ErrNotFound) && strings.HasPrefix(err.Error(), "token"):
		return catalog.TokenNotFound.Wrap(err, "%v", err)
	case errors.Is(err, users.ErrNotFound):
		return catalog.UserNotFound.Wrap(err, "%v", err)
	case errors.Is(err, users.ErrBadName):
		return catalog.BadUser.Wrap(err, "%v", err)
	}
	return err
}

func (s *Server) withUsers(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.Users == nil {
			writeError(w, catalog.NoRoute.New("%s %s: this server keeps no users", r.Method, r.URL.Path))
			return
		}
		h(w, r)
	}
}

// admin lets only an admin with the admin scope through.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return s.withUsers(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalFrom(r.Context())
		if !p.Can(users.ScopeAdmin) {
			writeError(w, forbidden(p, r.Method+" "+r.URL.Path, users.ScopeAdmin))
			return
		}
		h(w, r)
	})
}

// principalUser is the caller's user record (a built-in one without a
// users store).
func (s *Server) principalUser(ctx context.Context) (*users.User, error) {
	p, _ := PrincipalFrom(ctx)
	if s.o.Users == nil {
		return &users.User{ID: p.UserID, Name: p.Name, Role: p.Role}, nil
	}
	u, err := s.o.Users.User(ctx, p.UserID)
	return u, usersError(err)
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	p, _ := PrincipalFrom(r.Context())
	u, err := s.principalUser(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	doc := MeDoc{User: *u, Scopes: p.Scopes}
	if p.TokenID != "" {
		if doc.Token, err = s.o.Users.Token(r.Context(), p.TokenID); err != nil {
			writeError(w, usersError(err))
			return
		}
	}
	writeDoc(w, http.StatusOK, doc)
}

func (s *Server) quota(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "user")
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	u, err := s.principalUser(r.Context())
	if name := q.str("user"); err == nil && name != "" && name != u.Name {
		// Another user's quota: an admin's question (the users page).
		p, _ := PrincipalFrom(r.Context())
		if !p.Can(users.ScopeAdmin) {
			writeError(w, forbidden(p, "reading another user's quota", users.ScopeAdmin))
			return
		}
		if s.o.Users == nil {
			writeError(w, catalog.UserNotFound.New("user %s: this server keeps no users", name))
			return
		}
		u, err = s.o.Users.User(r.Context(), name)
		err = usersError(err)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	now := time.Now()
	per := users.PeriodsAt(now)
	doc := QuotaDoc{User: u.Name, Limits: s.o.Quota.Over(u.Limits), DayResets: per.NextDay, MonthResets: per.NextMonth}
	if s.o.Users != nil {
		if doc.Usage, err = s.o.Users.Usage(r.Context(), u.ID, now); err != nil {
			writeError(w, err)
			return
		}
	}
	writeDoc(w, http.StatusOK, doc)
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	us, err := s.o.Users.Users(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, UsersDoc{Users: us})
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	var body CreateUserRequest
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.Role == "" {
		body.Role = users.Member
	}
	doc, err := AddUser(r.Context(), s.o.Users, body.Name, body.Role)
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusCreated, doc)
}

// AddUser makes a user and its first token (named "first", with the
// role's scopes, expiring in DefaultTokenExpiry); agentrun server users
// add calls it on the server's host.
func AddUser(ctx context.Context, st users.Store, name string, role users.Role) (*UserDoc, error) {
	u, err := st.AddUser(ctx, name, role)
	if err != nil {
		return nil, usersError(err)
	}
	secret, t, err := st.CreateToken(ctx, u, "first", users.RoleScopes(role), time.Now().Add(DefaultTokenExpiry))
	if err != nil {
		return nil, usersError(err)
	}
	return &UserDoc{User: *u, Token: t, Secret: secret}, nil
}

func (s *Server) disableUser(disabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := s.o.Users.SetDisabled(r.Context(), r.PathValue("name"), disabled)
		if err != nil {
			writeError(w, usersError(err))
			return
		}
		writeDoc(w, http.StatusOK, UserDoc{User: *u})
	}
}

func (s *Server) setLimits(w http.ResponseWriter, r *http.Request) {
	var l users.Limits
	if err := decodeBody(w, r, &l); err != nil {
		writeError(w, err)
		return
	}
	u, err := s.o.Users.SetLimits(r.Context(), r.PathValue("name"), l)
	if err != nil {
		writeError(w, usersError(err))
		return
	}
	writeDoc(w, http.StatusOK, UserDoc{User: *u})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r, "all")
	all := q.on("all")
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	p, _ := PrincipalFrom(r.Context())
	who := p.UserID
	if all {
		if !p.Can(users.ScopeAdmin) {
			writeError(w, forbidden(p, "listing every user's tokens", users.ScopeAdmin))
			return
		}
		who = ""
	}
	ts, err := s.o.Users.Tokens(r.Context(), who)
	if err != nil {
		writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, TokensDoc{Tokens: ts})
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var body CreateTokenRequest
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	p, _ := PrincipalFrom(r.Context())
	owner := p.UserID
	if body.User != "" {
		if !p.Can(users.ScopeAdmin) {
			writeError(w, forbidden(p, "making another user's token", users.ScopeAdmin))
			return
		}
		owner = body.User
	}
	u, err := s.o.Users.User(r.Context(), owner)
	if err != nil {
		writeError(w, usersError(err))
		return
	}
	scopes := body.Scopes
	if len(scopes) == 0 {
		scopes = p.Scopes
		if owner != p.UserID {
			scopes = users.RoleScopes(u.Role)
		}
	}
	for _, sc := range scopes {
		// A token never reaches further than the one that made it.
		if slices.Contains(users.AllScopes, sc) && !p.Can(sc) {
			writeError(w, forbidden(p, "making a token with the scope "+sc, sc))
			return
		}
	}
	expires := time.Now().Add(DefaultTokenExpiry)
	if body.ExpiresIn != "" {
		d, err := time.ParseDuration(body.ExpiresIn)
		if err != nil || d < 0 {
			writeError(w, catalog.BadDuration.New("expires_in %q: give a duration like 720h (0: never)", body.ExpiresIn))
			return
		}
		expires = time.Now().Add(d)
		if d == 0 {
			expires = time.Time{}
		}
	}
	secret, t, err := s.o.Users.CreateToken(r.Context(), u, body.Name, scopes, expires)
	if err != nil {
		writeError(w, usersError(err))
		return
	}
	writeDoc(w, http.StatusCreated, TokenDoc{Token: *t, Secret: secret})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	p, _ := PrincipalFrom(r.Context())
	t, err := s.o.Users.Token(r.Context(), r.PathValue("id"))
	if err == nil && t.UserID != p.UserID && !p.Can(users.ScopeAdmin) {
		// Another's token is as unknown to a non-admin as a missing one.
		err = users.ErrNotFound
	}
	if err == nil {
		t, err = s.o.Users.RevokeToken(r.Context(), t.ID)
	}
	if err != nil {
		writeError(w, catalog.TokenNotFound.Wrap(err, "token %s", r.PathValue("id")))
		return
	}
	writeDoc(w, http.StatusOK, TokenDoc{Token: *t})
}
