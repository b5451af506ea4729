package testsupport

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// ForwardProxy is an HTTP forward proxy on loopback, as a company's: it
// tunnels CONNECT host:port and forwards absolute-URI requests, dialling
// the address Hosts maps a host:port to (the name itself when none), and
// records every target it was asked for. It stops when the test ends.
type ForwardProxy struct {
	URL   string // http://127.0.0.1:PORT
	Hosts map[string]string

	// Auth, when set, is the Proxy-Authorization every request must
	// carry; others get 407.
	Auth string

	mu      sync.Mutex
	targets []string
}

// NewForwardProxy starts a proxy mapping hosts (host:port to host:port).
func NewForwardProxy(tb testing.TB, hosts map[string]string) *ForwardProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &ForwardProxy{URL: "http://" + ln.Addr().String(), Hosts: hosts}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return p
}

// NewTLSForwardProxy starts a proxy as NewForwardProxy does, that its
// clients speak TLS to (an https:// proxy, URL https://localhost:PORT)
// with a certificate for localhost from ca.
func NewTLSForwardProxy(tb testing.TB, hosts map[string]string, ca *PrivateCA) *ForwardProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p := &ForwardProxy{URL: "https://localhost:" + port, Hosts: hosts}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(tb, "localhost")}},
		// HTTP/1.1 only: a CONNECT is hijacked.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	go srv.ServeTLS(ln, "", "")
	tb.Cleanup(func() { srv.Close() })
	return p
}

// Targets are the host:port targets asked for so far, in order.
func (p *ForwardProxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *ForwardProxy) dialled(target string) string {
	p.mu.Lock()
	p.targets = append(p.targets, target)
	p.mu.Unlock()
	if a, ok := p.Hosts[target]; ok {
		return a
	}
	return target
}

func (p *ForwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.Auth != "" && r.Header.Get("Proxy-Authorization") != p.Auth {
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
		http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		up, err := net.DialTimeout("tcp", p.dialled(r.Host), 5*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { io.Copy(up, rw); up.Close() }()
		io.Copy(c, up)
		c.Close()
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "a proxy takes absolute URLs", http.StatusBadRequest)
		return
	}
	host := r.URL.Host
	if r.URL.Port() == "" {
		host += ":80"
	}
	addr := p.dialled(host)
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Connection")
	out.Header.Del("Proxy-Authorization")
	if err := out.Write(up); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	fl := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			fl.Flush()
		}
		if err != nil {
			return
		}
	}
}

// PrivateCA is a certificate authority of the test's own, as a company's:
// CAPEM is its certificate, for NODE_EXTRA_CA_CERTS or SSL_CERT_FILE.
type PrivateCA struct {
	CAPEM []byte
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
}

// NewPrivateCA makes a CA.
func NewPrivateCA(tb testing.TB) *PrivateCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentrun test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &PrivateCA{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

// Leaf is a server certificate for names (DNS names or IP addresses),
// signed by the CA.
func (ca *PrivateCA) Leaf(tb testing.TB, names ...string) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(strings.Trim(n, "[]")); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TunnelProxy serves ln as the CONNECT side of an egress proxy: a
// CONNECT to a target that open admits is answered 200 with hello right
// after it, and the tunnel then echoes what comes; any other request is
// refused (403). It returns what it was asked so far ("METHOD
// host:port"), in order.
func TunnelProxy(tb testing.TB, ln net.Listener, open func(target string) bool, hello string) (asked func() []string) {
	var mu sync.Mutex
	var reqs []string
	Serve(tb, ln, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		mu.Lock()
		reqs = append(reqs, req.Method+" "+req.Host)
		mu.Unlock()
		if req.Method != http.MethodConnect || !open(req.Host) {
			io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
			return
		}
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"+hello)
		io.Copy(c, br)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reqs...)
	}
}
