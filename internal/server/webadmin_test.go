package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// uiSignIn signs c in to the server at base with token.
func uiSignIn(t *testing.T, c *http.Client, base, token string) {
	t.Helper()
	_, page := fetch(t, c, "GET", base+"/ui/login", nil)
	resp, body := fetch(t, c, "POST", base+"/ui/login", url.Values{"token": {token}, "csrf": {csrfOf(t, page)}, "next": {"/ui/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign in: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

// uiPost gets page, then posts form to action with the page's CSRF token.
func uiPost(t *testing.T, c *http.Client, base, page, action string, form url.Values) (*http.Response, string) {
	t.Helper()
	_, p := fetch(t, c, "GET", base+page, nil)
	form.Set("csrf", csrfOf(t, p))
	return fetch(t, c, "POST", base+action, form)
}

var secretField = regexp.MustCompile(`value="(agr_[^"]+)"`)

// shownSecret is the secret on a page that made a token.
func shownSecret(t *testing.T, page string) string {
	t.Helper()
	m := secretField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no secret shown:\n%s", page)
	}
	return m[1]
}

// TestUIAdminPages: an admin makes users and tokens in the UI (each
// secret shown once, on the answer page), the account pages escape what
// users named, every form needs its CSRF token, a member is refused the
// admin pages with a page that says why, a viewer gets no write controls
// (and the API refuses the writes anyway), a member sees their own runs,
// and the audit page lists the changes with their actor.
func TestUIAdminPages(t *testing.T) {
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), token: "boot-s3cret"})
	admin := browserClient(t)
	uiSignIn(t, admin, srv.url, "boot-s3cret")
	if _, page := fetch(t, admin, "GET", srv.url+"/ui/", nil); !strings.Contains(page, `id="who-name">bootstrap</strong>`) || !strings.Contains(page, `id="who-role">admin<`) ||
		!strings.Contains(page, `href="/ui/users"`) || !strings.Contains(page, `href="/ui/audit"`) {
		t.Fatalf("the admin's header and nav:\n%s", page)
	}

	// Every POST of the account pages needs the session's CSRF token.
	for _, p := range []string{"/ui/users", "/ui/users/ada/disable", "/ui/users/ada/enable", "/ui/users/ada/limits", "/ui/users/ada/tokens", "/ui/tokens", "/ui/tokens/t_x/revoke"} {
		if resp, body := fetch(t, admin, "POST", srv.url+p, url.Values{"name": {"ada"}, "role": {"member"}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("POST %s without the CSRF token: %d", p, resp.StatusCode)
		}
	}
	if a := srv.get(t, "/v1/users", ""); strings.Contains(string(a.body), `"ada"`) {
		t.Fatalf("a refused post made a user: %s", a.body)
	}

	// A member, made in the UI: the first token's secret is on the answer page only.
	resp, made := uiPost(t, admin, srv.url, "/ui/users", "/ui/users", url.Values{"name": {"ada"}, "role": {"member"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("make a user: %d\n%s", resp.StatusCode, made)
	}
	first := shownSecret(t, made)
	// Names with markup are refused by the API, and its answer shows them as text.
	for _, tc := range [][2]string{{"/ui/users", "/ui/users"}, {"/ui/users/ada", "/ui/users/ada/tokens"}} {
		resp, body := uiPost(t, admin, srv.url, tc[0], tc[1], url.Values{"name": {"laptop " + hostile}, "role": {"member"}})
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(body, "<script>alert") || !strings.Contains(body, "laptop &lt;script&gt;alert(1)") {
			t.Fatalf("POST %s with markup in the name: %d\n%s", tc[1], resp.StatusCode, body)
		}
	}
	resp, made = uiPost(t, admin, srv.url, "/ui/users/ada", "/ui/users/ada/tokens", url.Values{"name": {"laptop"}, "expires_in": {"720h"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("make a token: %d\n%s", resp.StatusCode, made)
	}
	laptop := shownSecret(t, made)
	_, users := fetch(t, admin, "GET", srv.url+"/ui/users", nil)
	_, ada := fetch(t, admin, "GET", srv.url+"/ui/users/ada", nil)
	for name, page := range map[string]string{"users": users, "user": ada} {
		if strings.Contains(page, first) || strings.Contains(page, laptop) {
			t.Errorf("the %s page shows a secret again", name)
		}
		if strings.Contains(page, "<script>alert") || strings.Count(page, "<script") != 1 {
			t.Errorf("the %s page holds markup a user named", name)
		}
	}
	if !strings.Contains(ada, `<td class="token-name">laptop</td>`) || !strings.Contains(ada, "runs_today") {
		t.Errorf("the user page lacks the escaped token name or the usage:\n%s", ada)
	}
	// Overrides and disabling from the user page.
	if resp, body := uiPost(t, admin, srv.url, "/ui/users/ada", "/ui/users/ada/limits", url.Values{"runs_per_day": {"7"}, "max_timeout": {"2h"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("limits: %d %s", resp.StatusCode, body)
	}
	if _, ada = fetch(t, admin, "GET", srv.url+"/ui/users/ada", nil); !strings.Contains(ada, `name="runs_per_day" value="7"`) {
		t.Errorf("the override is not shown")
	}
	q := srv.get(t, "/v1/quota?user=ada", "")
	conforms(t, "GET", "/v1/quota", q)
	if l, _ := q.doc(t)["limits"].(map[string]any); l["runs_per_day"] != float64(7) {
		t.Errorf("GET /v1/quota?user=ada: %s", q.body)
	}

	// The member: her name and role, no admin pages (a page that says why).
	member := browserClient(t)
	uiSignIn(t, member, srv.url, laptop)
	_, page := fetch(t, member, "GET", srv.url+"/ui/", nil)
	if !strings.Contains(page, `id="who-name">ada</strong>`) || !strings.Contains(page, `id="who-role">member<`) || strings.Contains(page, `href="/ui/users"`) || strings.Contains(page, `href="/ui/audit"`) {
		t.Errorf("the member's header and nav:\n%s", page)
	}
	for _, p := range []string{"/ui/users", "/ui/users/ada", "/ui/audit"} {
		resp, body := fetch(t, member, "GET", srv.url+p, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "this page is for admins") || !strings.Contains(body, "ada, a member") {
			t.Errorf("GET %s as a member: %d\n%s", p, resp.StatusCode, body)
		}
	}
	if resp, _ := uiPost(t, member, srv.url, "/ui/tokens", "/ui/users", url.Values{"name": {"eve"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a member making a user: %d", resp.StatusCode)
	}
	if q := srv.as(laptop).get(t, "/v1/quota?user=bootstrap", ""); q.status != http.StatusForbidden {
		t.Errorf("a member reading another's quota: %d", q.status)
	}
	// Her own tokens: made (secret once) and revoked from her page.
	resp, made = uiPost(t, member, srv.url, "/ui/tokens", "/ui/tokens", url.Values{"name": {"ci"}, "scope": {"runs:read"}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a member's token: %d\n%s", resp.StatusCode, made)
	}
	ci := shownSecret(t, made)
	_, toks := fetch(t, member, "GET", srv.url+"/ui/tokens", nil)
	if strings.Contains(toks, ci) || !strings.Contains(toks, "(this session)") || !strings.Contains(toks, `<td class="token-name">laptop <span class="meta">(this session)`) {
		t.Errorf("the tokens page:\n%s", toks)
	}
	ciID, _ := srv.as(ci).get(t, "/v1/me", "").doc(t)["token"].(map[string]any)["id"].(string)
	if resp, body := uiPost(t, member, srv.url, "/ui/tokens", "/ui/tokens/"+ciID+"/revoke", url.Values{"back": {"/ui/tokens"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	if a := srv.as(ci).get(t, "/v1/me", ""); a.status != http.StatusUnauthorized {
		t.Errorf("the revoked token: %d", a.status)
	}

	// Runs: the member's list shows hers only; a viewer gets no write controls.
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	mine := srv.as(laptop).runID(t, spec("hers", "true", nil), bundleOf(t, repo))
	theirs := srv.runID(t, spec("the admin's", "true", nil), bundleOf(t, repo))
	srv.waitState(t, mine, "succeeded", "failed")
	srv.waitState(t, theirs, "succeeded", "failed")
	if _, list := fetch(t, member, "GET", srv.url+"/ui/", nil); !strings.Contains(list, "/ui/runs/"+mine) || strings.Contains(list, theirs) {
		t.Errorf("the member's run list (hers %s, not %s):\n%s", mine, theirs, list)
	}
	if resp, _ := fetch(t, member, "GET", srv.url+"/ui/runs/"+theirs, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another's run page as a member: %d", resp.StatusCode)
	}
	vt := srv.addUser(t, "vic", "viewer")
	viewer := browserClient(t)
	uiSignIn(t, viewer, srv.url, vt)
	_, run := fetch(t, viewer, "GET", srv.url+"/ui/runs/"+mine, nil)
	if strings.Contains(run, "/verdict") || strings.Contains(run, "/cancel") || strings.Contains(run, `href="/ui/submit`) || !strings.Contains(run, `id="who-role">viewer<`) {
		t.Errorf("a viewer's run page has write controls:\n%s", run)
	}
	if resp, body := uiPost(t, viewer, srv.url, "/ui/runs/"+mine, "/ui/runs/"+mine+"/verdict", url.Values{"verdict": {"accept"}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "forbidden") {
		t.Errorf("a viewer's verdict: %d\n%s", resp.StatusCode, body)
	}

	// The audit page: the admin's changes, her actor name, payloads escaped.
	resp, audit := fetch(t, admin, "GET", srv.url+"/ui/audit", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("audit page: %d\n%s", resp.StatusCode, audit)
	}
	for _, want := range []string{"<code>user.add</code>", "<code>token.create</code>", "<code>token.revoke</code>", "<code>user.limits</code>", "<code>submit</code>",
		`<td class="actor">bootstrap</td>`, `<td class="actor">ada</td>`, "laptop &lt;script&gt;alert(1)", `href="/ui/runs/` + mine + `"`,
		"agentrun audit verify --server " + srv.url + " --key audit.pub", "agentrun server audit-key &gt; audit.pub"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit page lacks %q", want)
		}
	}
	if strings.Contains(audit, "<script>alert") || strings.Contains(audit, laptop) || strings.Contains(audit, first) {
		t.Errorf("the audit page holds markup or a secret")
	}
	key := srv.get(t, "/v1/audit/key", "").doc(t)
	if !strings.Contains(audit, key["fingerprint"].(string)) {
		t.Errorf("the audit page lacks the key's fingerprint %v", key["fingerprint"])
	}
	// Paging: one entry a page, newest first, and the run filter.
	_, p1 := fetch(t, admin, "GET", srv.url+"/ui/audit?limit=1", nil)
	older := regexp.MustCompile(`href="(/ui/audit\?[^"]+)" rel="next"`).FindStringSubmatch(p1)
	if older == nil || strings.Count(p1, "<tr data-seq=") != 1 {
		t.Fatalf("the first page of one entry:\n%s", p1)
	}
	_, p2 := fetch(t, admin, "GET", srv.url+strings.ReplaceAll(older[1], "&amp;", "&"), nil)
	seq := func(p string) int {
		n, _ := strconv.Atoi(regexp.MustCompile(`data-seq="(\d+)"`).FindStringSubmatch(p)[1])
		return n
	}
	if seq(p2) >= seq(p1) {
		t.Errorf("the older page's entry %d is not older than %d", seq(p2), seq(p1))
	}
	_, byRun := fetch(t, admin, "GET", srv.url+"/ui/audit?run="+mine, nil)
	if !strings.Contains(byRun, "<code>submit</code>") || strings.Contains(byRun, "<code>user.add</code>") {
		t.Errorf("the audit page of run %s:\n%s", mine, byRun)
	}

	// Revoking the member's token in the UI ends her session.
	laptopID := ""
	for _, tk := range srv.get(t, "/v1/tokens?all=true", "").doc(t)["tokens"].([]any) {
		if m := tk.(map[string]any); m["user"] == "ada" && m["name"] == "laptop" {
			laptopID = m["id"].(string)
		}
	}
	if resp, _ := uiPost(t, admin, srv.url, "/ui/users/ada", "/ui/tokens/"+laptopID+"/revoke", url.Values{"back": {"/ui/users/ada"}}); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/users/ada" {
		t.Fatalf("the admin's revoke: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := fetch(t, member, "GET", srv.url+"/ui/", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Errorf("the member's page after the revoke: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestPolicyRoute: GET /v1/policy answers the policy the server read at
// start as policy show --json does ("no policy" without one), and the
// policy page shows it.
func TestPolicyRoute(t *testing.T) {
	none := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), token: "tok"})
	a := none.get(t, "/v1/policy", "")
	conforms(t, "GET", "/v1/policy", a)
	if d := a.doc(t); d["policy"] != nil || d["digest"] != "" {
		t.Errorf("no policy: %s", a.body)
	}
	if a := none.as("").get(t, "/v1/policy", ""); a.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", a.status)
	}
	c := browserClient(t)
	uiSignIn(t, c, none.url, "tok")
	if _, page := fetch(t, c, "GET", none.url+"/ui/policy", nil); !strings.Contains(page, `id="no-policy"`) {
		t.Errorf("the policy page without a policy:\n%s", page)
	}

	file := filepath.Join(t.TempDir(), "org.toml")
	if err := os.WriteFile(file, []byte("version = 1\nagents = [\"command\"]\nmax_attempts = 3\n[[checks]]\nname = \"unit\"\ncommand = \"go test ./... <b>x</b>\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), token: "tok", extra: []string{"--policy", file}})
	a = srv.get(t, "/v1/policy", "")
	conforms(t, "GET", "/v1/policy", a)
	if err := schemas(t).Validate("policy.schema.json", a.body, jsonschema.Options{}); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Path, Source, Digest string
		Policy               map[string]any
	}
	if err := json.Unmarshal(a.body, &d); err != nil || d.Path != file || d.Source != "--policy" || !strings.HasPrefix(d.Digest, "sha256:") || d.Policy["max_attempts"] != float64(3) {
		t.Fatalf("GET /v1/policy: %s", a.body)
	}
	// The digest is the one policy check prints for the file.
	out, code := cli(t, "policy", "check", file, "--json")
	var check struct{ Digest string }
	if err := json.Unmarshal([]byte(out), &check); code != 0 || err != nil || check.Digest != d.Digest {
		t.Errorf("policy check: %d %s, want digest %s", code, out, d.Digest)
	}
	c = browserClient(t)
	uiSignIn(t, c, srv.url, "tok")
	_, page := fetch(t, c, "GET", srv.url+"/ui/policy", nil)
	for _, want := range []string{d.Digest, "unit=go test ./... &lt;b&gt;x&lt;/b&gt;", "max_attempts"} {
		if !strings.Contains(page, want) {
			t.Errorf("the policy page lacks %q", want)
		}
	}
}
