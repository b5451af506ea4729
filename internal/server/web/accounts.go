package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The account pages: the signed-in user's tokens, and for admins the
// users, their tokens, quotas and usage. Each draws the API's documents
// (docs/json: me, tokens, token, users, user, quota) and posts to its
// routes; a token's secret is shown once, on the page that answers the
// form which made it, never in a URL.

// adminRoutes registers the account, audit and policy pages.
func (u *UI) adminRoutes() {
	u.mux.HandleFunc("GET /ui/tokens", u.signedIn(u.tokensPage))
	u.mux.HandleFunc("POST /ui/tokens", u.signedIn(u.createToken))
	u.mux.HandleFunc("POST /ui/tokens/{id}/revoke", u.signedIn(u.revokeToken))
	u.mux.HandleFunc("GET /ui/users", u.signedIn(u.admin(u.usersPage)))
	u.mux.HandleFunc("POST /ui/users", u.signedIn(u.admin(u.createUser)))
	u.mux.HandleFunc("GET /ui/users/{name}", u.signedIn(u.admin(u.userPage)))
	u.mux.HandleFunc("POST /ui/users/{name}/disable", u.signedIn(u.admin(u.setDisabled("disable"))))
	u.mux.HandleFunc("POST /ui/users/{name}/enable", u.signedIn(u.admin(u.setDisabled("enable"))))
	u.mux.HandleFunc("POST /ui/users/{name}/limits", u.signedIn(u.admin(u.setLimits)))
	u.mux.HandleFunc("POST /ui/users/{name}/tokens", u.signedIn(u.admin(u.createToken)))
	u.mux.HandleFunc("GET /ui/audit", u.signedIn(u.admin(u.auditPage)))
	u.mux.HandleFunc("GET /ui/policy", u.signedIn(u.policyPage))
}

// admin serves h to admins; others get a page that says why not. (The
// API refuses them all the same: this is what they see.)
func (u *UI) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := ViewerOf(r.Context())
		if !v.Admin {
			u.fail(w, r, http.StatusForbidden, "this page is for admins",
				"you are signed in as "+v.Name+", a "+v.Role+": the users, their tokens and the audit log are an admin's to see",
				"ask an admin of this server, or sign in with an admin's token")
			return
		}
		h(w, r)
	}
}

// tokenDoc is token.schema.json's token.
type tokenDoc struct {
	ID         string   `json:"id"`
	User       string   `json:"user"`
	Name       string   `json:"name"`
	Hint       string   `json:"hint"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  string   `json:"expires_at"`
	LastUsedAt string   `json:"last_used_at"`
	RevokedAt  string   `json:"revoked_at"`
}

type userDoc struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Role      string         `json:"role"`
	Disabled  bool           `json:"disabled"`
	CreatedAt string         `json:"created_at"`
	Limits    map[string]any `json:"limits"`
}

// madeDoc is the answer of POST /v1/tokens and POST /v1/users.
type madeDoc struct {
	User   *userDoc  `json:"user"`
	Token  *tokenDoc `json:"token"`
	Secret string    `json:"secret"`
}

type meDoc struct {
	User   userDoc   `json:"user"`
	Scopes []string  `json:"scopes"`
	Token  *tokenDoc `json:"token"`
}

type tokensContent struct {
	Tokens  []tokenDoc
	Scopes  []string // what a new token may have: the caller's
	Current string   // the id of the token this session uses
	Action  string   // where the create form posts
	Back    string   // where revoke goes back to
	Problem *problem
}

func (u *UI) tokensPage(w http.ResponseWriter, r *http.Request) {
	u.showTokens(w, r, http.StatusOK, nil)
}

func (u *UI) showTokens(w http.ResponseWriter, r *http.Request, status int, p *problem) {
	var me meDoc
	if a, ok := u.get(r.Context(), "/v1/me", &me); !ok {
		u.failAPI(w, r, a)
		return
	}
	var doc struct {
		Tokens []tokenDoc `json:"tokens"`
	}
	if a, ok := u.get(r.Context(), "/v1/tokens", &doc); !ok {
		u.failAPI(w, r, a)
		return
	}
	c := tokensContent{Tokens: doc.Tokens, Scopes: me.Scopes, Action: "/ui/tokens", Back: "/ui/tokens", Problem: p}
	if me.Token != nil {
		c.Current = me.Token.ID
	}
	u.render(w, r, status, "tokens", "Your tokens", c)
}

// madeContent is the page that shows a secret, once.
type madeContent struct {
	User   *userDoc
	Token  *tokenDoc
	Secret string
	Back   string
}

// createToken posts the form as POST /v1/tokens (for the user the path
// names, on the users page) and shows the secret.
func (u *UI) createToken(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body := map[string]any{"name": strings.TrimSpace(r.PostFormValue("name"))}
	if sc := r.PostForm["scope"]; len(sc) > 0 {
		body["scopes"] = sc
	}
	if e := strings.TrimSpace(r.PostFormValue("expires_in")); e != "" {
		body["expires_in"] = e
	}
	back := "/ui/tokens"
	if name != "" {
		body["user"] = name
		back = "/ui/users/" + url.PathEscape(name)
	}
	a := u.postJSON(r.Context(), "/v1/tokens", body)
	var doc madeDoc
	if !a.decode(&doc) || doc.Token == nil {
		if name != "" {
			u.failAPI(w, r, a)
			return
		}
		p := a.problem()
		u.showTokens(w, r, a.status, &p)
		return
	}
	u.render(w, r, http.StatusCreated, "made", "Token "+doc.Token.Name, madeContent{Token: doc.Token, Secret: doc.Secret, Back: back})
}

// revokeToken revokes one token, then goes back to the page it was
// revoked on.
func (u *UI) revokeToken(w http.ResponseWriter, r *http.Request) {
	a := u.postJSON(r.Context(), "/v1/tokens/"+url.PathEscape(r.PathValue("id"))+"/revoke", map[string]any{})
	if a.status/100 != 2 {
		u.failAPI(w, r, a)
		return
	}
	http.Redirect(w, r, safeNext(r.PostFormValue("back")), http.StatusSeeOther)
}

type usersContent struct {
	Users []userDoc
	Roles []string
}

var roles = []string{"member", "viewer", "admin"}

func (u *UI) usersPage(w http.ResponseWriter, r *http.Request) {
	var doc struct {
		Users []userDoc `json:"users"`
	}
	if a, ok := u.get(r.Context(), "/v1/users", &doc); !ok {
		u.failAPI(w, r, a)
		return
	}
	u.render(w, r, http.StatusOK, "users", "Users", usersContent{Users: doc.Users, Roles: roles})
}

// createUser makes a user and shows its first token, once.
func (u *UI) createUser(w http.ResponseWriter, r *http.Request) {
	a := u.postJSON(r.Context(), "/v1/users", map[string]string{"name": strings.TrimSpace(r.PostFormValue("name")), "role": r.PostFormValue("role")})
	var doc madeDoc
	if !a.decode(&doc) || doc.User == nil {
		u.failAPI(w, r, a)
		return
	}
	u.render(w, r, http.StatusCreated, "made", "User "+doc.User.Name, madeContent{User: doc.User, Token: doc.Token, Secret: doc.Secret,
		Back: "/ui/users/" + url.PathEscape(doc.User.Name)})
}

// quotaDoc is quota.schema.json.
type quotaDoc struct {
	User        string         `json:"user"`
	Limits      map[string]any `json:"limits"`
	Usage       map[string]any `json:"usage"`
	DayResets   string         `json:"day_resets"`
	MonthResets string         `json:"month_resets"`
}

// limitKeys are the quota's keys, in the order the pages show them;
// max_timeout is a duration, the others numbers.
var limitKeys = []string{"concurrent_runs", "runs_per_day", "tokens_per_day", "tokens_per_month", "cost_per_day", "cost_per_month",
	"max_timeout", "max_attempts", "max_tokens", "max_cost"}

var usageKeys = []string{"concurrent_runs", "runs_today", "tokens_today", "tokens_month", "cost_today", "cost_month", "reserved_tokens", "reserved_cost"}

type kv struct{ Key, Value string }

type userContent struct {
	User      userDoc
	Tokens    []tokenDoc
	Overrides []kv // the user's own limits, for the form
	Effective []kv // the limits in force: the overrides over the server's defaults
	Usage     []kv
	Resets    string
	Scopes    []string
	Back      string
}

// userPage is one user: their quota and usage, overrides and tokens.
func (u *UI) userPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var c userContent
	var doc struct {
		Users []userDoc `json:"users"`
	}
	if a, ok := u.get(r.Context(), "/v1/users", &doc); !ok {
		u.failAPI(w, r, a)
		return
	}
	found := false
	for _, us := range doc.Users {
		if us.Name == name {
			c.User, found = us, true
		}
	}
	if !found {
		u.fail(w, r, http.StatusNotFound, "no such user", "this server has no user "+name, "see the users at /ui/users")
		return
	}
	var q quotaDoc
	if a, ok := u.get(r.Context(), "/v1/quota?user="+url.QueryEscape(name), &q); !ok {
		u.failAPI(w, r, a)
		return
	}
	var toks struct {
		Tokens []tokenDoc `json:"tokens"`
	}
	if a, ok := u.get(r.Context(), "/v1/tokens?all=true", &toks); !ok {
		u.failAPI(w, r, a)
		return
	}
	for _, t := range toks.Tokens {
		if t.User == name {
			c.Tokens = append(c.Tokens, t)
		}
	}
	for _, k := range limitKeys {
		c.Overrides = append(c.Overrides, kv{k, show(c.User.Limits[k])})
		c.Effective = append(c.Effective, kv{k, orUnlimited(show(q.Limits[k]))})
	}
	for _, k := range usageKeys {
		c.Usage = append(c.Usage, kv{k, show(q.Usage[k])})
	}
	c.Resets = "the day at " + when(q.DayResets) + ", the month at " + when(q.MonthResets)
	c.Scopes = roleScopes[c.User.Role]
	c.Back = "/ui/users/" + url.PathEscape(name)
	u.render(w, r, http.StatusOK, "user", "User "+name, c)
}

// roleScopes are the scopes each role's tokens may have (users.RoleScopes).
var roleScopes = map[string][]string{"admin": {"runs:read", "runs:write", "admin"}, "member": {"runs:read", "runs:write"}, "viewer": {"runs:read"}}

func (u *UI) setDisabled(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		a := u.postJSON(r.Context(), "/v1/users/"+url.PathEscape(name)+"/"+verb, map[string]any{})
		if a.status/100 != 2 {
			u.failAPI(w, r, a)
			return
		}
		http.Redirect(w, r, "/ui/users/"+url.PathEscape(name), http.StatusSeeOther)
	}
}

// setLimits posts the overrides form: an empty field is no override
// (the server's default applies).
func (u *UI) setLimits(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body := map[string]any{}
	for _, k := range limitKeys {
		v := strings.TrimSpace(r.PostFormValue(k))
		if v == "" {
			continue
		}
		n, err := limitValue(k, v)
		if err != nil {
			u.fail(w, r, http.StatusBadRequest, "bad limit "+k, err.Error(), "give a number (max_timeout: a duration like 2h), or leave it empty for the server's default")
			return
		}
		body[k] = n
	}
	a := u.postJSON(r.Context(), "/v1/users/"+url.PathEscape(name)+"/limits", body)
	if a.status/100 != 2 {
		u.failAPI(w, r, a)
		return
	}
	http.Redirect(w, r, "/ui/users/"+url.PathEscape(name), http.StatusSeeOther)
}

// limitValue is a limit field's value as the API takes it.
func limitValue(k, v string) (any, error) {
	switch {
	case k == "max_timeout":
		return v, nil
	case strings.HasPrefix(k, "cost_") || k == "max_cost":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return nil, formError(k + ": " + v + " is not a number")
		}
	default:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return nil, formError(k + ": " + v + " is not a whole number")
		}
	}
	return json.Number(v), nil
}

// show is a document's value as text ("" for none).
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

func orUnlimited(s string) string {
	if s == "" {
		return "no limit"
	}
	return s
}

// tokenTable is what the tokentable template gets, from the tokens page
// or a user's page.
func tokenTable(c any, csrf string) map[string]any {
	m := map[string]any{"CSRF": csrf}
	switch c := c.(type) {
	case tokensContent:
		m["Tokens"], m["Current"], m["Back"] = c.Tokens, c.Current, c.Back
	case userContent:
		m["Tokens"], m["Current"], m["Back"] = c.Tokens, "", c.Back
	}
	return m
}

// tokenForm is what the tokenform template gets.
func tokenForm(action string, scopes []string, csrf string) map[string]any {
	return map[string]any{"Action": action, "Scopes": scopes, "CSRF": csrf}
}
