package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestWebUIAdminInBrowser: in headless Chromium an admin makes a member
// and a token for her on the users page, she signs in with it and sees
// only her runs, the admin revokes the token on her page and her next
// page asks her to sign in again; the audit page lists the admin's
// changes with the admin as actor. With AGENTRUN_UI_SCREENSHOT_DIR set,
// the users and audit pages are saved there.
func TestWebUIAdminInBrowser(t *testing.T) {
	ctx := browser(t)
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), token: "boot-s3cret"})
	shot := func(name string) {
		dir := os.Getenv("AGENTRUN_UI_SCREENSHOT_DIR")
		if dir == "" {
			return
		}
		png := get(t, ctx, chromedp.FullScreenshot(100))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	do(t, ctx, "the admin signs in",
		chromedp.Navigate(srv.url+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), "boot-s3cret"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("table.runs")))
	if who := get(t, ctx, chromedp.TextContent(chromedp.CSS(".who"))); !strings.Contains(who, "bootstrap") || !strings.Contains(who, "admin") {
		t.Errorf("the header says %q", who)
	}
	do(t, ctx, "the admin makes a member",
		chromedp.Click(chromedp.CSS(`a[href="/ui/users"]`)),
		chromedp.WaitVisible(chromedp.ID("u-name")),
		chromedp.SetValue(chromedp.ID("u-name"), "ada"),
		chromedp.SetValue(chromedp.ID("u-role"), "member"),
		chromedp.Submit(chromedp.ID("u-name")),
		chromedp.WaitVisible(chromedp.ID("secret")))
	if s := get(t, ctx, chromedp.Value(chromedp.ID("secret"))); !strings.HasPrefix(s, "agr_") {
		t.Fatalf("the first token's secret shown: %q", s)
	}
	do(t, ctx, "the admin makes a token for her",
		chromedp.Click(chromedp.CSS(`main a[href="/ui/users/ada"]`)),
		chromedp.WaitVisible(chromedp.ID("t-name")),
		chromedp.SetValue(chromedp.ID("t-name"), "laptop"),
		chromedp.SetValue(chromedp.ID("t-expires"), "720h"),
		chromedp.Submit(chromedp.ID("t-name")),
		chromedp.WaitVisible(chromedp.ID("secret")))
	secret := get(t, ctx, chromedp.Value(chromedp.ID("secret")))
	if !strings.HasPrefix(secret, "agr_") || strings.Contains(get(t, ctx, chromedp.Location()), secret) {
		t.Fatalf("the token's secret %q (page %s)", secret, get(t, ctx, chromedp.Location()))
	}

	// A run of each: she sees hers only.
	repo, _ := testsupport.Repo(t, map[string]string{"a.txt": "a\n"})
	mine := srv.as(secret).runID(t, spec("hers", "true", nil), bundleOf(t, repo))
	theirs := srv.runID(t, spec("the admin's", "true", nil), bundleOf(t, repo))
	srv.waitState(t, mine, "succeeded", "failed")
	srv.waitState(t, theirs, "succeeded", "failed")
	mctx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	do(t, mctx, "the member signs in with her token",
		chromedp.Navigate(srv.url+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), secret),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("table.runs")))
	list := get(t, mctx, chromedp.TextContent(chromedp.CSS("table.runs")))
	if !strings.Contains(list, mine) || strings.Contains(list, theirs) {
		t.Errorf("her run list (hers %s, not %s): %s", mine, theirs, list)
	}
	if who := get(t, mctx, chromedp.TextContent(chromedp.CSS(".who"))); !strings.Contains(who, "ada") || !strings.Contains(who, "member") {
		t.Errorf("her header says %q", who)
	}
	if n := get(t, mctx, chromedp.Evaluate[int](`document.querySelectorAll('a[href="/ui/users"], a[href="/ui/audit"]').length`)); n != 0 {
		t.Errorf("her nav has %d admin entries", n)
	}

	// The admin revokes it on her page; her next page asks her to sign in.
	do(t, ctx, "the admin revokes her token",
		chromedp.Navigate(srv.url+"/ui/users/ada"),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Revoke the token laptop"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Revoke the token laptop"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-token] .state-failed`)))
	shot("users.png")
	do(t, mctx, "her next page",
		chromedp.Navigate(srv.url+"/ui/runs/"+mine),
		chromedp.WaitVisible(chromedp.ID("token")))
	if loc := get(t, mctx, chromedp.Location()); !strings.Contains(loc, "/ui/login") {
		t.Errorf("after the revoke she is at %s", loc)
	}

	do(t, ctx, "the audit page",
		chromedp.Click(chromedp.CSS(`a[href="/ui/audit"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.audit")))
	rows := get(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.audit tbody tr")).map(r => r.querySelector(".actor").textContent + " " + r.querySelector(".action").textContent)`))
	for _, want := range []string{"bootstrap user.add", "bootstrap token.create", "bootstrap token.revoke", "ada submit"} {
		found := false
		for _, r := range rows {
			found = found || r == want
		}
		if !found {
			t.Errorf("the audit page lacks %q: %q", want, rows)
		}
	}
	if cmd := get(t, ctx, chromedp.TextContent(chromedp.ID("verify-command"))); cmd != "agentrun audit verify --server "+srv.url+" --key audit.pub" {
		t.Errorf("the verify command: %q", cmd)
	}
	shot("audit.png")
}
