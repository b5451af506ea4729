package gateway

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// NetEnv are the variables that say how this host reaches a model
// server, as the agents' CLIs read them when they run bare: the proxy for
// https:// and http:// URLs and the hosts that bypass it (Claude Code,
// Codex, Gemini CLI, Qwen Code and opencode honour them), and the
// certificate authorities trusted besides the system's (the Node.js
// CLIs' NODE_EXTRA_CA_CERTS, OpenSSL's SSL_CERT_FILE and SSL_CERT_DIR).
// A run's supervisor gets their values with its handoff, as it gets
// keys: its own environment is kept minimal.
var NetEnv = []string{"https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY",
	"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// HostNet is how the host reaches model servers: directly, or through
// the user's proxy, trusting the system's certificate authorities and
// any the user added. A proxy never carries a request to the host's own
// loopback (localhost, 127.0.0.1, ::1), whatever NO_PROXY says.
type HostNet struct {
	proxy func(*url.URL) (*url.URL, error)
	roots *x509.CertPool // nil: the system's alone
	// Proxies name the variables a proxy comes from, with their values
	// (credentials left out): "https_proxy=http://proxy:3128".
	Proxies []string
	// NoProxy is what bypasses them (no_proxy, else NO_PROXY).
	NoProxy string
	// CAs name the certificate files and directories that added to the
	// system's, as VARIABLE=PATH; Warnings those that added nothing
	// (unreadable, or no PEM certificate in them), with why.
	CAs, Warnings []string
}

// NewHostNet reads NetEnv through getenv (nil: none set): the proxies
// (ProxiesOf) and the certificate authorities, whose files it reads.
func NewHostNet(getenv Getenv) HostNet {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	n := ProxiesOf(getenv)
	var files []string
	for _, k := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"} {
		if v := getenv(k); v != "" {
			files = append(files, k+"="+v)
		}
	}
	for d := range strings.SplitSeq(getenv("SSL_CERT_DIR"), ":") {
		if d != "" {
			files = append(files, "SSL_CERT_DIR="+d)
		}
	}
	if len(files) == 0 {
		return n
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, f := range files {
		name, path, _ := strings.Cut(f, "=")
		if err := addCerts(pool, path, name == "SSL_CERT_DIR"); err != nil {
			n.Warnings = append(n.Warnings, fmt.Sprintf("%s: %v", f, err))
		} else {
			n.CAs = append(n.CAs, f)
		}
	}
	n.roots = pool
	return n
}

// ProxiesOf is the proxy part of NewHostNet alone, for what only dials
// (no certificate file is read): the proxy variables as Node.js CLIs read
// them (undici's EnvHttpProxyAgent), the lower-case ones first, and an
// https:// URL through the http:// proxy when no https:// one is named.
func ProxiesOf(getenv Getenv) HostNet {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	first := func(names ...string) (value, from string) {
		for _, name := range names {
			if v := strings.TrimSpace(getenv(name)); v != "" {
				return v, name
			}
		}
		return "", ""
	}
	var n HostNet
	httpsProxy, httpsFrom := first("https_proxy", "HTTPS_PROXY")
	httpProxy, httpFrom := first("http_proxy", "HTTP_PROXY")
	noProxy, _ := first("no_proxy", "NO_PROXY")
	n.NoProxy = noProxy
	for _, p := range [][2]string{{httpsFrom, httpsProxy}, {httpFrom, httpProxy}} {
		if p[0] != "" {
			n.Proxies = append(n.Proxies, p[0]+"="+RedactRaw(p[1]))
		}
	}
	if httpsProxy != "" || httpProxy != "" {
		cfg := httpproxy.Config{HTTPSProxy: cmp.Or(httpsProxy, httpProxy), HTTPProxy: httpProxy, NoProxy: noProxy}
		n.proxy = cfg.ProxyFunc()
	}
	return n
}

// addCerts adds the PEM certificates in file path (every file in it,
// for a directory) to pool.
func addCerts(pool *x509.CertPool, path string, dir bool) error {
	paths := []string{path}
	if dir {
		ents, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		paths = paths[:0]
		for _, e := range ents {
			if !e.IsDir() {
				paths = append(paths, filepath.Join(path, e.Name()))
			}
		}
	}
	added := false
	var errs []error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if pool.AppendCertsFromPEM(b) {
			added = true
		}
	}
	if !added {
		return errors.Join(append(errs, errors.New("no PEM certificate read"))...)
	}
	return nil
}

// Proxy is the proxy a request to u goes through, nil for none.
func (n HostNet) Proxy(u *url.URL) (*url.URL, error) {
	if n.proxy == nil {
		return nil, nil
	}
	return n.proxy(u)
}

// Roots are the certificate authorities a server (or an https://
// proxy) of this machine is checked against: the system's and the
// user's (nil: the system's alone).
func (n HostNet) Roots() *x509.CertPool { return n.roots }

// TLSProxy reports whether a proxy it names is an https:// one (spoken
// to over TLS, checked against Roots).
func (n HostNet) TLSProxy() bool {
	return slices.ContainsFunc(n.Proxies, func(p string) bool {
		_, v, _ := strings.Cut(p, "=")
		return strings.HasPrefix(strings.ToLower(v), "https://")
	})
}

// Transport is an HTTP transport to model servers.
func (n HostNet) Transport() *http.Transport {
	tr := &http.Transport{
		Proxy:                 func(r *http.Request) (*url.URL, error) { return n.Proxy(r.URL) },
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if n.roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: n.roots}
	}
	return tr
}

// Dialled is the host:port a connection to the server at URL raw goes
// to: the server's, or its proxy's.
func (n HostNet) Dialled(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if p, err := n.Proxy(u); err != nil {
		return "", err
	} else if p != nil {
		u = p
	}
	return addrOf(u), nil
}

// ProxyAddr is the host:port of the proxy a host outside this machine is
// reached through by scheme ("https" or "http"), "" for none.
func (n HostNet) ProxyAddr(scheme string) string {
	if p, err := n.Proxy(&url.URL{Scheme: scheme, Host: "agentrun.invalid"}); err == nil && p != nil {
		return addrOf(p)
	}
	return ""
}

// addrOf is u's host and port, the scheme's when it names none.
func addrOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
