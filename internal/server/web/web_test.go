package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestSessionExpiry: a session ends SessionTTL after sign-in; its cookie
// then signs nobody in, and the pages send the browser to sign in again.
func TestSessionExpiry(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	check := func(tok string) (string, bool) { return "token", tok == "tok" }
	u := New(Options{API: http.NewServeMux(), NeedLogin: true, Check: check, Now: clk.now, SessionTTL: time.Hour})
	// As the server does: the session's token is looked up on each request.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := u.SessionToken(r)
		if ok {
			_, ok = check(tok)
		}
		u.ServeHTTP(w, r.WithContext(WithViewer(r.Context(), Viewer{Name: "token", OK: ok})))
	})
	serve := func(method, path string, form url.Values, cookies ...*http.Cookie) *httptest.ResponseRecorder {
		var req *http.Request
		if form != nil {
			req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req = httptest.NewRequest(method, path, nil)
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	cookie := func(w *httptest.ResponseRecorder, name string) *http.Cookie {
		for _, c := range w.Result().Cookies() {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no cookie %s", name)
		return nil
	}
	lw := serve("GET", "/ui/login", nil)
	login := cookie(lw, loginCookie)
	w := serve("POST", "/ui/login", url.Values{"token": {"tok"}, "csrf": {login.Value}}, login)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	session := cookie(w, sessionCookie)
	if session.MaxAge != 3600 {
		t.Errorf("the session cookie lasts %ds, want 3600", session.MaxAge)
	}
	if w := serve("GET", "/ui/submit", nil, session); w.Code != http.StatusOK {
		t.Fatalf("a page in the session: %d", w.Code)
	}
	clk.add(time.Hour - time.Second)
	if w := serve("GET", "/ui/submit", nil, session); w.Code != http.StatusOK {
		t.Fatalf("a page before the session's end: %d", w.Code)
	}
	clk.add(time.Second)
	if w := serve("GET", "/ui/submit", nil, session); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/ui/login") {
		t.Fatalf("a page after the session's end: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if len(u.sessions.m) != 0 {
		t.Errorf("%d sessions kept after their end", len(u.sessions.m))
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/runs/abc": "/ui/runs/abc", "/ui/?state=failed": "/ui/?state=failed", "": "/ui/",
		"https://evil.example/": "/ui/", "//evil.example/ui/": "/ui/", "/ui//evil.example": "/ui/",
		"/v1/runs": "/ui/", "/ui/\\evil": "/ui/", "/ui/\r\nSet-Cookie: x": "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRenderDiff(t *testing.T) {
	patch := "diff --git a/a.go b/a.go\nindex 1..2 100644\n--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,2 @@\n package a\n-var x = 1\n+var x = \"+++ 2\"\n" +
		"diff --git a/old name.txt b/old name.txt\ndeleted file mode 100644\n--- a/old name.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n\\ No newline at end of file\n" +
		"diff --git a/bin b/bin\nnew file mode 100644\nBinary files /dev/null and b/bin differ\n"
	files, note := renderDiff(patch)
	if note != "" || len(files) != 3 {
		t.Fatalf("%d files, note %q", len(files), note)
	}
	if files[0].Name != "a.go" || files[1].Name != "old name.txt" || files[2].Name != "bin" || !files[2].Binary {
		t.Errorf("names: %q %q %q (binary %v)", files[0].Name, files[1].Name, files[2].Name, files[2].Binary)
	}
	kinds := ""
	for _, l := range files[0].Lines {
		kinds += l.Kind + " "
	}
	if kinds != "hunk ctx del add " {
		t.Errorf("a.go's lines: %s", kinds)
	}
	add := files[0].Lines[3]
	var text strings.Builder
	classed := false
	for _, tk := range add.Tokens {
		text.WriteString(tk.Text)
		classed = classed || tk.Class != ""
	}
	if add.Mark != "+" || text.String() != `var x = "+++ 2"` || !classed {
		t.Errorf("the added line: %+v", add)
	}
	if got := files[1].Lines[len(files[1].Lines)-1]; got.Mark != "\\" {
		t.Errorf("the no-newline note: %+v", got)
	}
	if _, note := renderDiff(""); note == "" {
		t.Error("an empty patch has no note")
	}
}
