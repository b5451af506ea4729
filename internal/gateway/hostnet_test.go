package gateway

import (
	"cmp"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestHostNetThroughProxy: the gateway reaches a model server as the
// user's CLIs would bare, behind a company's proxy and its certificate
// authority: through HTTPS_PROXY (CONNECT) or HTTP_PROXY, trusting the
// CA that NODE_EXTRA_CA_CERTS, SSL_CERT_FILE or SSL_CERT_DIR names. The
// server's name resolves nowhere but at the proxy. Without the CA, the
// server is not trusted.
func TestHostNetThroughProxy(t *testing.T) {
	ca := testsupport.NewPrivateCA(t)
	tlsUp := httptest.NewUnstartedServer(modelAPI(nil))
	tlsUp.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "models.corp.invalid")}}
	tlsUp.StartTLS()
	t.Cleanup(tlsUp.Close)
	plainUp := httptest.NewServer(modelAPI(nil))
	t.Cleanup(plainUp.Close)
	name := func(s *httptest.Server) string {
		_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
		return "models.corp.invalid:" + port
	}
	hosts := map[string]string{name(tlsUp): tlsUp.Listener.Addr().String(), name(plainUp): plainUp.Listener.Addr().String()}
	px := testsupport.NewForwardProxy(t, hosts)
	tlsPx := testsupport.NewTLSForwardProxy(t, hosts, ca) // an https:// proxy, its certificate from the same CA
	dir := t.TempDir()
	caFile := filepath.Join(dir, "corp.pem")
	if err := os.WriteFile(caFile, ca.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	os.Mkdir(certDir, 0o700)
	os.WriteFile(filepath.Join(certDir, "corp.crt"), ca.CAPEM, 0o600)

	chat := func(t *testing.T, upstream string, env map[string]string) int {
		t.Helper()
		hn := NewHostNet(func(k string) string { return env[k] })
		u, _ := url.Parse(upstream)
		tg := startGateway(t, Options{Routes: testRoutes(u), Transport: hn.Transport()})
		for _, name := range []string{"chat", "chat-stream"} {
			p := protoByName(t, name)
			resp, body := tg.do(t, "POST", "/openai"+p.path, p.keyHdr(tg.Placeholder()), p.body)
			if resp.StatusCode != http.StatusOK {
				return resp.StatusCode
			}
			if name == "chat-stream" && !strings.Contains(string(body), "[DONE]") {
				t.Fatalf("the stream through the proxy: %s", body)
			}
		}
		return http.StatusOK
	}
	for _, c := range []struct {
		name, upstream string
		env            map[string]string
		want           int
		px             *testsupport.ForwardProxy // (nil: px)
	}{
		{"https, NODE_EXTRA_CA_CERTS", "https://" + name(tlsUp), map[string]string{"HTTPS_PROXY": px.URL, "NODE_EXTRA_CA_CERTS": caFile}, 200, nil},
		{"https, SSL_CERT_FILE", "https://" + name(tlsUp), map[string]string{"https_proxy": px.URL, "SSL_CERT_FILE": caFile}, 200, nil},
		{"https, SSL_CERT_DIR", "https://" + name(tlsUp), map[string]string{"https_proxy": px.URL, "SSL_CERT_DIR": "/nonexistent:" + certDir}, 200, nil},
		{"https, the CA not trusted", "https://" + name(tlsUp), map[string]string{"HTTPS_PROXY": px.URL}, http.StatusBadGateway, nil},
		{"http", "http://" + name(plainUp), map[string]string{"HTTP_PROXY": px.URL}, 200, nil},
		{"an https proxy", "https://" + name(tlsUp), map[string]string{"HTTPS_PROXY": tlsPx.URL, "NODE_EXTRA_CA_CERTS": caFile}, 200, tlsPx},
		{"an https proxy, plain http", "http://" + name(plainUp), map[string]string{"HTTP_PROXY": tlsPx.URL, "NODE_EXTRA_CA_CERTS": caFile}, 200, tlsPx},
	} {
		t.Run(c.name, func(t *testing.T) {
			px := cmp.Or(c.px, px)
			before := len(px.Targets())
			if got := chat(t, c.upstream, c.env); got != c.want {
				t.Fatalf("status %d, want %d", got, c.want)
			}
			u, _ := url.Parse(c.upstream)
			if !slices.Contains(px.Targets()[before:], u.Host) {
				t.Fatalf("the proxy was asked for %v, not %s", px.Targets()[before:], u.Host)
			}
		})
	}
}

// TestHostNetProxyChoice: NO_PROXY is honoured, the lower-case variables
// come first, and the host's loopback is never proxied (a local model
// server stays local whatever the proxy variables say).
func TestHostNetProxyChoice(t *testing.T) {
	env := map[string]string{"HTTPS_PROXY": "http://upper.example:3128", "https_proxy": "http://lower.example:3128",
		"HTTP_PROXY": "http://plain.example:3128", "NO_PROXY": "internal.example,.corp.example"}
	hn := NewHostNet(func(k string) string { return env[k] })
	for raw, want := range map[string]string{
		"https://api.anthropic.com":         "http://lower.example:3128",
		"http://models.example:8000":        "http://plain.example:3128",
		"https://internal.example":          "",
		"https://gpu.corp.example:8443":     "",
		"http://127.0.0.1:1234":             "",
		"http://localhost:11434":            "",
		"http://[::1]:8080":                 "",
		"https://generativelanguage.google": "http://lower.example:3128",
	} {
		u, _ := url.Parse(raw)
		p, err := hn.Proxy(u)
		got := ""
		if p != nil {
			got = p.String()
		}
		if err != nil || got != want {
			t.Errorf("proxy for %s: %q, %v; want %q", raw, got, err, want)
		}
	}
	if addr, _ := hn.Dialled("https://api.anthropic.com"); addr != "lower.example:3128" {
		t.Errorf("dialled %s", addr)
	}
	if addr, _ := hn.Dialled("http://127.0.0.1:1234/v1"); addr != "127.0.0.1:1234" {
		t.Errorf("dialled %s", addr)
	}
	if p, _ := (HostNet{}).Proxy(&url.URL{Scheme: "https", Host: "api.openai.com"}); p != nil {
		t.Errorf("no variables, proxy %s", p)
	}
	bad := NewHostNet(func(k string) string { return map[string]string{"NODE_EXTRA_CA_CERTS": "/nonexistent/ca.pem"}[k] })
	if len(bad.Warnings) != 1 || !strings.Contains(bad.Warnings[0], "NODE_EXTRA_CA_CERTS=/nonexistent/ca.pem") {
		t.Errorf("warnings %q", bad.Warnings)
	}
}
