package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
)

// TestServerURL: an OpenAI-compatible URL is taken as an OpenAI client
// takes it, the base before /chat/completions, unless it is a server's
// root or ends in /v1 (then the root the agent's /v1 paths go under).
// The other families' URLs are roots whatever their path.
func TestServerURL(t *testing.T) {
	for _, c := range []struct {
		raw, family, want string
		base              bool
	}{
		{"http://localhost:1234", RouteOpenAI, "http://localhost:1234", false},
		{"http://localhost:1234/v1/", RouteOpenAI, "http://localhost:1234", false},
		{"https://openrouter.ai/api/v1", RouteOpenAI, "https://openrouter.ai/api", false},
		{"https://open.bigmodel.cn/api/paas/v4", RouteOpenAI, "https://open.bigmodel.cn/api/paas/v4", true},
		{"https://open.bigmodel.cn/api/paas/v4/?x=1", RouteOpenAI, "https://open.bigmodel.cn/api/paas/v4", true},
		{"https://generativelanguage.googleapis.com/v1beta/openai", RouteOpenAI, "https://generativelanguage.googleapis.com/v1beta/openai", true},
		{"https://ark.cn-beijing.volces.com/api/v3", RouteOpenAI, "https://ark.cn-beijing.volces.com/api/v3", true},
		{"https://api.deepseek.com/anthropic", RouteAnthropic, "https://api.deepseek.com/anthropic", false},
		{"https://gpu.example.com/v1beta", RouteGemini, "https://gpu.example.com", false},
	} {
		got, base, err := ServerURL(c.raw, c.family)
		if err != nil || got != c.want || base != c.base {
			t.Errorf("ServerURL(%q, %s) = %q, %v, %v; want %q, %v", c.raw, c.family, got, base, err, c.want, c.base)
		}
	}
	if _, _, err := ServerURL("localhost:1234/v1", RouteOpenAI); err == nil {
		t.Error("a URL without a scheme is no server URL")
	}
}

func TestURLFor(t *testing.T) {
	for _, c := range []struct {
		rs   run.RouteSpec
		p    string
		want string
	}{
		{run.RouteSpec{URL: "http://localhost:1234"}, "/v1/models", "http://localhost:1234/v1/models"},
		{run.RouteSpec{URL: "https://h.example/api/paas/v4", Base: true}, "/v1/models", "https://h.example/api/paas/v4/models"},
		{run.RouteSpec{URL: "https://h.example/api/paas/v4", Base: true}, "/v1", "https://h.example/api/paas/v4"},
		// Only a whole /v1 segment is the base's to replace.
		{run.RouteSpec{URL: "https://h.example/api/paas/v4", Base: true}, "/v1beta/models", "https://h.example/api/paas/v4/v1beta/models"},
	} {
		if got := URLFor(c.rs, c.p); got != c.want {
			t.Errorf("URLFor(%+v, %q) = %q; want %q", c.rs, c.p, got, c.want)
		}
	}
}

// TestBaseRouteForwarding: an agent's /v1 request on a route whose URL is
// an API's base goes to that base, with the real key, streamed or not,
// and its usage is read as any route's.
func TestBaseRouteForwarding(t *testing.T) {
	// The provider serves its API under /api/paas/v4 only.
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/api/paas/v4/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/v1/" + rest
		modelAPI(nil)(w, r)
	})
	routes := testRoutes(up.url)
	u := *up.url
	u.Path = "/api/paas/v4"
	routes[RouteOpenAI] = Route{Upstream: &u, Base: true, Credential: routes[RouteOpenAI].Credential}
	tg := startGateway(t, Options{Routes: routes})
	for _, name := range []string{"chat", "chat-stream", "responses"} {
		p := protoByName(t, name)
		resp, body := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", name, resp.StatusCode, body)
		}
		got := up.last(t)
		if want := "/api/paas/v4" + strings.TrimPrefix(p.path, "/v1"); got.Path != want || got.Header.Get("Authorization") != "Bearer "+realOpenAI {
			t.Fatalf("%s: forwarded to %s with %q, want %s", name, got.Path, got.Header.Get("Authorization"), want)
		}
	}
	p := protoByName(t, "chat")
	if resp, _ := tg.do(t, "GET", "/openai/v1/models", p.keyHdr(tg.Placeholder()), ""); resp.StatusCode != http.StatusOK || up.last(t).Path != "/api/paas/v4/models" {
		t.Fatalf("model list: %d, forwarded to %s", resp.StatusCode, up.last(t).Path)
	}
	if u := tg.Usage(); u.Requests != 3 || u.PromptTokens == 0 {
		t.Fatalf("usage %+v", u)
	}
}
