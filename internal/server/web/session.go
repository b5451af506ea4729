package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

const (
	sessionCookie = "agentrun_session"
	// loginCookie carries the sign-in form's CSRF token (a double-submit
	// cookie): before sign-in there is no session to keep it in.
	loginCookie = "agentrun_login"
	loginTTL    = 15 * time.Minute
	// maxSessions bounds the memory sessions take; past it the expired
	// go first, then any.
	maxSessions = 10000
)

// session is one browser's sign-in. Only the hash of its id is kept: the
// id itself lives in the browser's cookie.
type session struct {
	token    string // the API token signed in with ("" without sign-in)
	csrf     string // every form's token
	expires  time.Time
	signedIn bool
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session // by the hash of the id
	now func() time.Time
	ttl time.Duration
}

func newSessions(now func() time.Time, ttl time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, now: now, ttl: ttl}
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func hashID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// create starts a session and returns its id.
func (s *sessions) create(token string, signedIn bool) (string, *session) {
	id := random()
	ss := &session{token: token, csrf: random(), expires: s.now().Add(s.ttl), signedIn: signedIn}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		now := s.now()
		for k, v := range s.m {
			if !now.Before(v.expires) {
				delete(s.m, k)
			}
		}
		for k := range s.m {
			if len(s.m) < maxSessions {
				break
			}
			delete(s.m, k)
		}
	}
	s.m[hashID(id)] = ss
	return id, ss
}

// get is the live session of id (nil: none, or expired).
func (s *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	k := hashID(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[k]
	if ss != nil && !s.now().Before(ss.expires) {
		delete(s.m, k)
		return nil
	}
	return ss
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, hashID(id))
	s.mu.Unlock()
}

func cookieValue(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}

// SessionToken is the API token that the request's session cookie
// stands for, while the session lasts (false: no signed-in session).
func (u *UI) SessionToken(r *http.Request) (string, bool) {
	ss := u.sessions.get(cookieValue(r, sessionCookie))
	if ss == nil || !ss.signedIn {
		return "", false
	}
	return ss.token, true
}

// setCookie sets a UI cookie: HttpOnly, SameSite=Strict, for /ui/ only
// (the API never sees it), Secure over TLS; maxAge < 0 clears it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(maxAge / time.Second)}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

type sessionKey struct{}

func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// signedIn serves h to a signed-in viewer (any viewer when no sign-in is
// needed, who then gets a session for the forms' CSRF tokens); others go
// to the sign-in page. A POST must carry its session's CSRF token.
func (u *UI) signedIn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := u.sessions.get(cookieValue(r, sessionCookie))
		switch {
		case !ViewerOf(r.Context()).OK:
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			u.fail(w, r, http.StatusUnauthorized, "sign in first", "this request has no session, or its session ended", "sign in again at /ui/login")
			return
		case ss == nil && !u.o.NeedLogin:
			var id string
			id, ss = u.sessions.create("", false)
			setCookie(w, r, sessionCookie, id, u.o.SessionTTL)
		}
		if ss != nil {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss))
		}
		if r.Method == http.MethodPost && (ss == nil || !sameToken(r.PostFormValue("csrf"), ss.csrf)) {
			u.fail(w, r, http.StatusForbidden, "the form's CSRF token is missing or wrong", "the form did not come from this session's page", "reload the page and send the form again")
			return
		}
		h(w, r)
	}
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// safeNext is where sign-in goes on to: a UI path, never another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "/ui//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

type loginContent struct {
	Next, Error string
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	if !u.o.NeedLogin || ViewerOf(r.Context()).OK && u.sessions.get(cookieValue(r, sessionCookie)) != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	u.showLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), "")
}

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	tok := random()
	setCookie(w, r, loginCookie, tok, loginTTL)
	r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, &session{csrf: tok}))
	u.render(w, r, status, "login", "Sign in", loginContent{Next: safeNext(next), Error: msg})
}

// login trades a good API token for a new session (a new id: one set
// before sign-in is never promoted).
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if !u.o.NeedLogin {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	next := r.PostFormValue("next")
	if !sameToken(r.PostFormValue("csrf"), cookieValue(r, loginCookie)) {
		u.showLogin(w, r, http.StatusForbidden, next, "The sign-in form expired or did not come from this server: try again.")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if _, ok := u.o.Check(tok); tok == "" || !ok {
		u.showLogin(w, r, http.StatusUnauthorized, next, "That token is not accepted here.")
		return
	}
	if old := cookieValue(r, sessionCookie); old != "" {
		u.sessions.remove(old)
	}
	id, _ := u.sessions.create(tok, true)
	setCookie(w, r, sessionCookie, id, u.o.SessionTTL)
	setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	u.sessions.remove(cookieValue(r, sessionCookie))
	setCookie(w, r, sessionCookie, "", -1)
	to := "/ui/login"
	if !u.o.NeedLogin {
		to = "/ui/"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
