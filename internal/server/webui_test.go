package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/server"
)

// hostile is what an agent or a client may have written: markup and
// script in every string the pages show.
const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`

// uiDocs are the commands' documents the fake Exec answers with.
var uiDocs = map[string]any{
	"list": map[string]any{"runs": []map[string]any{
		{"id": "aaa111", "status": "failed", "reason": "checks_failed", "created_at": "2026-01-02T03:04:05Z", "repo": "/srv/projects/alpha.git", "agent": "claude", "attempts": 1, "task": "Fix the flaky auth tests " + hostile},
		{"id": "bbb222", "status": "succeeded", "reason": "completed", "created_at": "2026-01-02T03:04:05Z", "repo": "/srv/projects/beta.git", "agent": "codex", "attempts": 2, "task": "Add a README section"},
	}},
	"status": map[string]any{"id": "aaa111", "status": "succeeded", "reason": "completed", "message": hostile, "task": hostile,
		"repo": "/srv/projects/alpha.git", "base_commit": "0123456789abcdef0123456789abcdef01234567", "branch": "agentrun/aaa111",
		"commit": "89abcdef0123456789abcdef0123456789abcdef", "created_at": "2026-01-02T03:04:05Z", "subdir": "svc/api",
		"warnings": []string{"the base commit has submodules (" + hostile + ")"},
		"agent":    map[string]any{"name": "", "command": hostile}, "checks": []map[string]any{{"name": "unit", "command": "go test"}},
		"sandbox": map[string]any{"backend": "native", "network": "allowlist"},
		"attempts": []map[string]any{{"n": 1, "started_at": "2026-01-02T03:04:05Z", "exit_code": 0, "outcome": "completed", "message": hostile,
			"checks": []map[string]any{{"name": "unit", "exit_code": 1, "passed": false, "duration": "1s", "log": "x"}}}},
		"usage": map[string]any{"prompt_tokens": 1200, "completion_tokens": 340, "requests": 3, "cost_usd": 0.0123}},
	"logs": map[string]any{"id": "aaa111", "logs": []map[string]any{{"attempt": 1, "kind": "agent", "text": "agent says " + hostile + "\n"}}},
	"diff": map[string]any{"id": "aaa111", "patch": "diff --git a/" + hostile + ".go b/" + hostile + ".go\nnew file mode 100644\n--- /dev/null\n+++ b/" + hostile + ".go\n@@ -0,0 +1,2 @@\n+package main\n+// " + hostile + "\n"},
	"egress": map[string]any{"id": "aaa111", "network": "allowlist", "allow": []string{"proxy.golang.org"},
		"allowed": []map[string]any{{"host": "proxy.golang.org", "port": 443, "count": 2, "bytes_up": 10, "bytes_down": 20, "via": "http://proxy.corp.example:3128"}},
		"denied":  []map[string]any{{"host": hostile, "port": 80, "count": 1, "why": hostile, "code": "x", "flag": ""}}},
	"verdict": map[string]any{"id": "aaa111", "verdict": map[string]any{"value": "accept", "at": "2026-01-02T03:04:05Z"}},
	"submit":  map[string]any{"id": "ccc333", "status": "queued", "reason": "", "branch": "agentrun/ccc333", "commit": "", "patch": "", "run_dir": "/x"},
}

// fakeExec answers each command line with its document and remembers
// the lines (and stdin) it was given.
type fakeExec struct {
	mu    sync.Mutex
	calls [][]string
	stdin []string
	over  map[string]any // a test's documents, in place of uiDocs'
}

func (f *fakeExec) exec(_ context.Context, args []string, stdin io.Reader) ([]byte, []byte, int) {
	in, _ := io.ReadAll(stdin)
	f.mu.Lock()
	f.calls = append(f.calls, args)
	f.stdin = append(f.stdin, string(in))
	over, overOK := f.over[args[0]]
	f.mu.Unlock()
	d, ok := uiDocs[args[0]]
	if overOK {
		d, ok = over, true
	}
	if args[0] == "logs" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--check=") }) {
		d = map[string]any{"id": "aaa111", "logs": []map[string]any{{"attempt": 1, "kind": "check", "name": "unit", "text": "FAIL " + hostile + "\n"}}}
	}
	if !ok {
		return []byte(`{"error":{"code":"internal","error":"no document","exit_code":7}}`), nil, 7
	}
	b, _ := json.Marshal(d)
	return b, nil, 0
}

// called returns the command lines of command name.
func (f *fakeExec) called(name string) [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]string
	for _, c := range f.calls {
		if c[0] == name {
			out = append(out, c)
		}
	}
	return out
}

// uiServer is the server's handler, in process, over the fake Exec.
func uiServer(t *testing.T, token string) (*httptest.Server, *fakeExec) {
	t.Helper()
	f := &fakeExec{}
	dir := t.TempDir()
	for _, p := range []string{"alpha", "beta"} {
		if err := os.MkdirAll(filepath.Join(dir, p+".git", "objects"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s := server.New(server.Options{Exec: f.exec, Projects: &server.Projects{Dir: dir}, Token: token})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, f
}

// browserClient keeps cookies and does not follow redirects.
func browserClient(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func fetch(t *testing.T, c *http.Client, method, u string, form url.Values, hdr ...string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	return m[1]
}

// TestUIHeaders: every UI answer (pages, errors, assets, redirects)
// carries the CSP and the other security headers.
func TestUIHeaders(t *testing.T) {
	ts, _ := uiServer(t, "")
	tok, _ := uiServer(t, "tok")
	c := browserClient(t)
	for _, u := range []string{ts.URL + "/ui/", ts.URL + "/ui/?state=failed", ts.URL + "/ui/runs/aaa111", ts.URL + "/ui/submit",
		ts.URL + "/ui/nothing", ts.URL + "/ui/static/app.js", ts.URL + "/ui/static/app.css", ts.URL + "/ui/static/chroma.css",
		tok.URL + "/ui/login", tok.URL + "/ui/", tok.URL + "/ui/runs/aaa111"} {
		resp, _ := fetch(t, c, "GET", u, nil)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s (%d): CSP %q lacks %q", u, resp.StatusCode, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("GET %s: CSP %q allows unsafe sources", u, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: nosniff %q, referrer policy %q", u, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
	// A browser asking for / goes to the UI; an API client gets what it got.
	resp, _ := fetch(t, c, "GET", ts.URL+"/", nil, "Accept", "text/html")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET / from a browser: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := fetch(t, c, "GET", ts.URL+"/", nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no_route") {
		t.Errorf("GET / from a client: %d %s", resp.StatusCode, body)
	}
	if resp, _ := fetch(t, c, "GET", tok.URL+"/", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET / from a client without the token: %d", resp.StatusCode)
	}
}

// TestUIEscapes: what agents and clients wrote is shown as text, on every
// page that shows it.
func TestUIEscapes(t *testing.T) {
	ts, _ := uiServer(t, "")
	c := browserClient(t)
	for _, p := range []string{"/ui/", "/ui/runs/aaa111"} {
		resp, body := fetch(t, c, "GET", ts.URL+p, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || strings.Count(body, "<script") != 1 {
			t.Errorf("GET %s: the agent's markup is in the page as markup:\n%s", p, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;") {
			t.Errorf("GET %s: the agent's markup is not shown escaped", p)
		}
	}
	_, run := fetch(t, c, "GET", ts.URL+"/ui/runs/aaa111", nil)
	for _, want := range []string{
		`<h3 class="file-name">&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;.go</h3>`, // the file name
		"agent says &lt;script&gt;",           // the agent's log
		"FAIL &lt;script&gt;",                 // the check's output
		"unit: failed (exit 1)",               // the check's result in words
		`<span class="kn">package</span>`,     // the diff highlighted
		"$0.0123", "1200", "proxy.golang.org", // cost, usage, egress
		`via http://proxy.corp.example:3128`,                                              // through this machine's proxy
		"<code>svc/api</code> (where the agent and the checks start)",                     // the run's directory
		"Warned at submit: the base commit has submodules (&lt;script&gt;",                // its warnings, escaped
		`href="/ui/submit?project=alpha&amp;base=agentrun%2faaa111&amp;subdir=svc%2fapi"`, // a follow-up starts there too
	} {
		if !strings.Contains(run, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
}

// TestUIFailureHints: the page of a failed run says what result says of
// why it failed (the model server refused the key; no network), escaped;
// a run that did not fail asks for no result.
func TestUIFailureHints(t *testing.T) {
	ts, f := uiServer(t, "")
	c := browserClient(t)
	if _, page := fetch(t, c, "GET", ts.URL+"/ui/runs/aaa111", nil); strings.Contains(page, `class="hint"`) || len(f.called("result")) != 0 {
		t.Fatalf("a succeeded run's page asked for its result (%v) or shows a hint", f.called("result"))
	}
	failed := map[string]any{}
	for k, v := range uiDocs["status"].(map[string]any) {
		failed[k] = v
	}
	failed["status"], failed["reason"] = "failed", "model_error"
	f.mu.Lock()
	f.over = map[string]any{"status": failed, "result": map[string]any{"id": "aaa111", "status": "failed", "reason": "model_error",
		"model":   map[string]any{"upstream": "http://127.0.0.1:1234", "status": 401, "errors": 2, "hint": "the model server refused the key from LOCAL_KEY " + hostile},
		"network": map[string]any{"hint": "the run had no network"}}}
	f.mu.Unlock()
	resp, page := fetch(t, c, "GET", ts.URL+"/ui/runs/aaa111", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, page)
	}
	model := `<p class="hint" role="note">the model server refused the key from LOCAL_KEY &lt;script&gt;alert(1)&lt;/script&gt;`
	network := `<p class="hint" role="note">the run had no network</p>`
	if i, j := strings.Index(page, model), strings.Index(page, network); i < 0 || j < i {
		t.Fatalf("the failed run's page lacks its hints, model first:\n%s", page)
	}
	if got := f.called("result"); len(got) != 1 || !slices.Contains(got[0], "aaa111") {
		t.Fatalf("result calls %v", got)
	}
}

// TestUIFilters: the state filter is the API's; project and text filter
// the list document.
func TestUIFilters(t *testing.T) {
	ts, f := uiServer(t, "")
	c := browserClient(t)
	for _, tc := range []struct {
		query     string
		want, not []string
	}{
		{"", []string{"aaa111", "bbb222"}, nil},
		{"?project=beta", []string{"bbb222"}, []string{"aaa111"}},
		{"?q=FLAKY", []string{"aaa111"}, []string{"bbb222"}},
		{"?q=readme&project=alpha", nil, []string{"aaa111", "bbb222"}},
	} {
		_, body := fetch(t, c, "GET", ts.URL+"/ui/"+tc.query, nil)
		for _, id := range tc.want {
			if !strings.Contains(body, "/ui/runs/"+id) {
				t.Errorf("%q: %s is not listed", tc.query, id)
			}
		}
		for _, id := range tc.not {
			if strings.Contains(body, "/ui/runs/"+id) {
				t.Errorf("%q: %s is listed", tc.query, id)
			}
		}
	}
	fetch(t, c, "GET", ts.URL+"/ui/?state=failed", nil)
	calls := f.called("list")
	if last := calls[len(calls)-1]; !slices.Contains(last, "--status=failed") {
		t.Errorf("the state filter did not reach list: %v", last)
	}
}

// TestUICSRF: a form post without its session's token changes nothing;
// with it, it reaches the API.
func TestUICSRF(t *testing.T) {
	ts, f := uiServer(t, "")
	c := browserClient(t)
	_, page := fetch(t, c, "GET", ts.URL+"/ui/runs/aaa111", nil)
	csrf := csrfOf(t, page)
	other := browserClient(t)
	_, otherPage := fetch(t, other, "GET", ts.URL+"/ui/runs/aaa111", nil)
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  []string
		code int
	}{
		{"no token", url.Values{"verdict": {"accept"}}, nil, http.StatusForbidden},
		{"a wrong token", url.Values{"verdict": {"accept"}, "csrf": {strings.Repeat("0", 64)}}, nil, http.StatusForbidden},
		{"another session's token", url.Values{"verdict": {"accept"}, "csrf": {csrfOf(t, otherPage)}}, nil, http.StatusForbidden},
		{"from another site", url.Values{"verdict": {"accept"}, "csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	} {
		if resp, body := fetch(t, c, "POST", ts.URL+"/ui/runs/aaa111/verdict", tc.form, tc.hdr...); resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.name, resp.StatusCode, tc.code, body)
		}
	}
	for _, p := range []string{"/ui/runs/aaa111/cancel", "/ui/submit", "/ui/logout"} {
		if resp, _ := fetch(t, c, "POST", ts.URL+p, url.Values{"base": {"x"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without a token: %d", p, resp.StatusCode)
		}
	}
	if n := len(f.called("verdict")) + len(f.called("cancel")) + len(f.called("submit")); n != 0 {
		t.Fatalf("%d refused posts reached the commands", n)
	}
	resp, _ := fetch(t, c, "POST", ts.URL+"/ui/runs/aaa111/verdict", url.Values{"verdict": {"reject"}, "note": {"not <b>this</b>"}, "csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs/aaa111" {
		t.Fatalf("verdict with the token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if v := f.called("verdict"); len(v) != 1 || !slices.Equal(v[0][len(v[0])-4:], []string{"--note=not <b>this</b>", "--", "aaa111", "reject"}) {
		t.Errorf("verdict's command lines: %v", v)
	}
}

// TestUISubmitForm: the form becomes POST /v1/runs without a bundle, on
// the project's repository; the browser goes on to the new run.
func TestUISubmitForm(t *testing.T) {
	ts, f := uiServer(t, "")
	c := browserClient(t)
	// A follow-up's form starts where its run did.
	if _, page := fetch(t, c, "GET", ts.URL+"/ui/submit?project=alpha&base=agentrun%2faaa111&subdir=svc%2fapi", nil); !strings.Contains(page, `name="subdir" value="svc/api"`) {
		t.Errorf("the follow-up form does not start in svc/api:\n%s", page)
	}
	_, page := fetch(t, c, "GET", ts.URL+"/ui/submit", nil)
	form := url.Values{"csrf": {csrfOf(t, page)}, "project": {"alpha"}, "base": {"agentrun/bbb222"}, "subdir": {"svc/api"}, "task": {"Do <it>"},
		"agent_cmd": {"make fix"}, "sandbox": {"native"}, "checks": {"unit=go test ./...\n\nlint = go vet ./...\n"}, "attempts": {"2"}}
	resp, body := fetch(t, c, "POST", ts.URL+"/ui/submit", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs/ccc333" {
		t.Fatalf("submit: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	s := f.called("submit")
	if len(s) != 1 {
		t.Fatalf("submit's command lines: %v", s)
	}
	for _, want := range []string{"--base=agentrun/bbb222", "--subdir=svc/api", "--agent-cmd=make fix", "--sandbox=native", "--attempts=2", "--check=unit=go test ./...", "--check=lint=go vet ./..."} {
		if !slices.Contains(s[0], want) {
			t.Errorf("submit %v lacks %q", s[0], want)
		}
	}
	if !slices.ContainsFunc(s[0], func(a string) bool { return strings.HasPrefix(a, "--repo=") && strings.HasSuffix(a, "alpha.git") }) {
		t.Errorf("submit %v does not name the project's repository", s[0])
	}
	// A project the server does not have needs a bundle: the API's error
	// is shown with the form.
	form.Set("project", "gamma")
	resp, body = fetch(t, c, "POST", ts.URL+"/ui/submit", form)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "bad_bundle") || !strings.Contains(body, "Do &lt;it&gt;") {
		t.Errorf("submit to an unknown project: %d\n%s", resp.StatusCode, body)
	}
}

// TestUISignIn: with a token the UI asks for it, trades it for a session
// cookie (HttpOnly, SameSite=Strict, for /ui/ only), which the API does
// not take; signing out ends the session.
func TestUISignIn(t *testing.T) {
	ts, _ := uiServer(t, "tok")
	c := browserClient(t)
	resp, _ := fetch(t, c, "GET", ts.URL+"/ui/runs/aaa111", nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/login?next=%2Fui%2Fruns%2Faaa111" {
		t.Fatalf("a page without a session: %d to %q", resp.StatusCode, loc)
	}
	if resp, _ := fetch(t, c, "POST", ts.URL+"/ui/login", url.Values{"token": {"tok"}, "next": {"/ui/runs/aaa111"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in without the form's token: %d", resp.StatusCode)
	}
	_, page := fetch(t, c, "GET", ts.URL+"/ui/login", nil)
	csrf := csrfOf(t, page)
	if resp, body := fetch(t, c, "POST", ts.URL+"/ui/login", url.Values{"token": {"wrong"}, "csrf": {csrf}}); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not accepted") {
		t.Errorf("sign-in with a wrong token: %d", resp.StatusCode)
	}
	_, page = fetch(t, c, "GET", ts.URL+"/ui/login", nil)
	csrf = csrfOf(t, page)
	resp, _ = fetch(t, c, "POST", ts.URL+"/ui/login", url.Values{"token": {"tok"}, "csrf": {csrf}, "next": {"https://evil.example/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign-in: %d to %q (a foreign next must not be followed)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "agentrun_session" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui/" || session.Secure || session.MaxAge <= 0 {
		t.Fatalf("the session cookie: %+v", session)
	}
	resp, page = fetch(t, c, "GET", ts.URL+"/ui/runs/aaa111", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Sign out") {
		t.Fatalf("a page with the session: %d", resp.StatusCode)
	}
	// The cookie is for the UI: the API takes bearer tokens only.
	if resp, _ := fetch(t, c, "GET", ts.URL+"/v1/runs", nil, "Cookie", "agentrun_session="+session.Value); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API with the session cookie: %d", resp.StatusCode)
	}
	if resp, _ := fetch(t, c, "GET", ts.URL+"/v1/runs", nil, "Authorization", "Bearer tok"); resp.StatusCode != http.StatusOK {
		t.Errorf("the API with the token: %d", resp.StatusCode)
	}
	resp, _ = fetch(t, c, "POST", ts.URL+"/ui/logout", url.Values{"csrf": {csrfOf(t, page)}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("sign-out: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The old cookie, sent again, no longer signs in.
	fresh := browserClient(t)
	if resp, _ := fetch(t, fresh, "GET", ts.URL+"/ui/", nil, "Cookie", "agentrun_session="+session.Value); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a page with the ended session: %d", resp.StatusCode)
	}
}
