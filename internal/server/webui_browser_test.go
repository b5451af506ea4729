package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// browser starts a headless Chromium (Debian's) and returns a context
// driving one tab of it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := testsupport.Program(t, "chromium")
	// Chromium's own temporary directory (its singleton socket, which it
	// leaves behind when it is killed, as it is at the end) and HOME (its
	// crash reports' settings): the test's.
	tmp := testsupport.ShortDir(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Env("TMPDIR="+tmp, "HOME="+tmp),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 1600))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		testsupport.Require(t, "chromium", false, "start headless chromium: %v", err)
	}
	return ctx
}

// xssAgent prints markup and a script into its output, holds until gate
// exists (so the test sees output arrive while the run goes on), then
// writes a Go file with markup in it and a file whose name is markup.
const xssAgent = `echo 'first line <script>document.title="pwned";window.__xss=1</script>'; ` +
	`echo '<img src=x onerror="window.__xss=2"><b>bold?</b>'; ` +
	`while [ ! -e GATE ]; do sleep 0.1; done; echo 'second line'; ` +
	`printf 'package main\n\n// <script>window.__xss=3</script>\nfunc f() string { return "<b>bold</b>" }\n' > f.go; ` +
	`echo '<i>markup</i><script>window.__xss=4</script>' > '<img src=x onerror=window.__xss=5>.txt'`

// TestWebUIInBrowser drives the web UI in headless Chromium against a
// real server with a token: sign in, submit from the form, watch the log
// arrive live, see the diff highlighted, record a verdict and find it
// stored. The agent's markup and script stay text: none of it runs.
func TestWebUIInBrowser(t *testing.T) {
	ctx := browser(t)
	repo, base := testsupport.Repo(t, map[string]string{"main.go": "package main\n\nfunc main() {}\n"})
	srv := start(t, config{data: t.TempDir(), db: "sqlite:" + filepath.Join(t.TempDir(), "agentrun.db"), token: "ui-s3cret"})
	// A first submit over the API brings the project and its base.
	first := srv.runID(t, spec("nothing", "true", nil), bundleOf(t, repo))
	srv.waitState(t, first, "succeeded", "failed")

	// Sign in: the UI sends a browser without a session to the sign-in page.
	do(t, ctx, "sign in",
		chromedp.Navigate(srv.url+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")))
	if loc := get(t, ctx, chromedp.Location()); !strings.Contains(loc, "/ui/login") {
		t.Fatalf("a browser without a session is at %s, not the sign-in page", loc)
	}
	do(t, ctx, "sign in",
		chromedp.SetValue(chromedp.ID("token"), "ui-s3cret"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("table.runs")))

	// Submit from the form: the agent holds at its gate after its first lines.
	gate := filepath.Join(t.TempDir(), "gate")
	task := `Say <b>hello</b><script>window.__xss=6</script>`
	do(t, ctx, "submit from the form",
		chromedp.Navigate(srv.url+"/ui/submit"),
		chromedp.WaitVisible(chromedp.ID("s-base")),
		chromedp.SetValue(chromedp.ID("s-base"), base),
		chromedp.SetValue(chromedp.ID("s-task"), task),
		chromedp.SetValue(chromedp.ID("s-agent-cmd"), strings.ReplaceAll(xssAgent, "GATE", gate)),
		chromedp.SetValue(chromedp.ID("s-sandbox"), "host"),
		chromedp.SetValue(chromedp.ID("s-checks"), "lint=test -f f.go"),
		chromedp.Submit(chromedp.ID("s-base")),
		chromedp.WaitVisible(chromedp.ID("live")))
	loc := get(t, ctx, chromedp.Location())
	id := loc[strings.LastIndex(loc, "/")+1:]

	// The log arrives while the run goes on.
	do(t, ctx, "the log arrives live",
		chromedp.Poll[chromedp.Void](`document.getElementById("live").textContent.includes("first line")`, chromedp.WithPollingTimeout(60*time.Second)))
	live := get(t, ctx, chromedp.TextContent(chromedp.ID("live")))
	state := get(t, ctx, chromedp.TextContent(chromedp.ID("state")))
	if strings.Contains(live, "second line") || ended(state) {
		t.Fatalf("the run went on past its gate: state %q, log %q", state, live)
	}
	for _, want := range []string{`first line <script>document.title="pwned";window.__xss=1</script>`, `<img src=x onerror="window.__xss=2"><b>bold?</b>`} {
		if !strings.Contains(live, want) {
			t.Errorf("the live log does not show %q as text: %q", want, live)
		}
	}
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#events li").length`)); n == 0 {
		t.Error("no journal event was shown")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the stream ends with the run",
		chromedp.Poll[chromedp.Void](`document.getElementById("live").textContent.includes("second line")`, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.WaitReady(chromedp.CSS("body[data-run-ended]")))
	if got := get(t, ctx, chromedp.AttributeValue(chromedp.CSS("body"), "data-run-ended")).Value; got != "succeeded" {
		t.Fatalf("the run ended %q: %s", got, get(t, ctx, chromedp.TextContent(chromedp.ID("main"))))
	}
	noScriptRan(t, ctx)

	// The run page again, now with its diff.
	do(t, ctx, "the diff",
		chromedp.Navigate(srv.url+"/ui/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(".file-name")))
	files := get(t, ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll(".file-name")).map(e => e.textContent).join("\n")`))
	if !strings.Contains(files, "f.go") || !strings.Contains(files, "<img src=x onerror=window.__xss=5>.txt") {
		t.Errorf("the diff's file names: %q", files)
	}
	diff := get(t, ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("pre.diff")).map(e => e.textContent).join("\n")`))
	for _, want := range []string{`return "<b>bold</b>"`, `// <script>window.__xss=3</script>`, `<i>markup</i><script>window.__xss=4</script>`} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff does not show %q as text: %q", want, diff)
		}
	}
	if got := get(t, ctx, chromedp.TextContent(chromedp.CSS("pre.task"))); got != task {
		t.Errorf("the task is shown as %q, want %q", got, task)
	}
	if get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("pre.diff span.line.add span[class]").length`)) == 0 {
		t.Error("the diff's added lines carry no highlighting")
	}
	images := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("img, i, b").length`))
	scripts := get(t, ctx, chromedp.Evaluate[int](`document.scripts.length`))
	if images != 0 || scripts != 1 {
		t.Errorf("the page holds %d img/i/b elements and %d scripts: the agent's markup became elements", images, scripts)
	}
	noScriptRan(t, ctx)
	if p := os.Getenv("AGENTRUN_UI_SCREENSHOT"); p != "" {
		png := get(t, ctx, chromedp.FullScreenshot(100))
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("the run page's screenshot: %s", p)
	}

	// A verdict from the page is stored.
	do(t, ctx, "the verdict",
		chromedp.SetValue(chromedp.ID("v-note"), "looks <b>right</b>"),
		chromedp.Click(chromedp.CSS(`button[name=verdict][value=accept]`)),
		chromedp.WaitVisible(chromedp.CSS(`#verdict .verdict-accept`)))
	if v := get(t, ctx, chromedp.TextContent(chromedp.ID("verdict"))); !strings.Contains(v, "looks <b>right</b>") {
		t.Errorf("the verdict shown: %q", v)
	}
	st := srv.get(t, "/v1/runs/{id}", id).doc(t)
	if v, _ := st["verdict"].(map[string]any); v["value"] != "accept" || v["note"] != "looks <b>right</b>" {
		t.Errorf("the stored verdict: %v", st["verdict"])
	}
}

// ended reports whether a state shown is a final one.
func ended(state string) bool {
	for _, s := range []string{"succeeded", "failed", "cancelled", "interrupted"} {
		if strings.HasPrefix(state, s) {
			return true
		}
	}
	return false
}

// do runs steps in the browser, failing with the page on an error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		t.Fatalf("%s: %v\npage:\n%s", what, err, html)
	}
}

// get runs one action in the browser and returns its value.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// noScriptRan checks that none of the agent's scripts ran.
func noScriptRan(t *testing.T, ctx context.Context) {
	t.Helper()
	xss := get(t, ctx, chromedp.Evaluate[string](`String(window.__xss)`))
	title := get(t, ctx, chromedp.Title())
	if xss != "undefined" || strings.Contains(title, "pwned") {
		t.Errorf("an agent's script ran: window.__xss %s, title %q", xss, title)
	}
}
