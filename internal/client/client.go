package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
)

// maxDoc bounds a JSON answer (a patch rides in one).
const maxDoc = 256 << 20

// maxIdlePerHost is how many idle connections to the server are kept.
const maxIdlePerHost = 32

// Client calls one team server.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	// Warn, when set, is told each warning the server sent with an
	// answer (its Agentrun-Warning headers).
	Warn func(msg string)
}

// New returns a client of the server at rawURL (http:// or https://),
// sending token as a bearer token when it is not empty.
func New(rawURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(rawURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, catalog.Usage.New("--server %q: want the server's URL, like http://127.0.0.1:8080 or https://agentrun.example.com", rawURL)
	}
	// No overall timeout: a cancel waits for its run, a stream lasts as
	// long as the run. Connecting and the first byte of an answer are
	// bounded by the transport.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 10 * time.Minute
	// An agent host keeps several calls open at once (its claim's long
	// poll, its heartbeat's wait, a run's writes, events and logs): with
	// the default two idle connections, the calls of a burst past two
	// dial anew each time (a handshake and the server's accept, about a
	// millisecond under load) and close again.
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	return &Client{base: u, token: token, http: &http.Client{Transport: tr}}, nil
}

// URL is the server's URL, for messages.
func (c *Client) URL() string { return c.base.String() }

// Get answers GET path?query with its document.
func (c *Client) Get(ctx context.Context, path string, query url.Values) ([]byte, error) {
	return c.doc(ctx, "GET", path, query, nil, "")
}

// Post sends body (JSON; nil sends none) to path and answers its document.
func (c *Client) Post(ctx context.Context, path string, body any) ([]byte, error) {
	var r io.Reader
	ctype := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, catalog.Internal.Wrap(err, "encode the request: %v", err)
		}
		r, ctype = bytes.NewReader(b), "application/json"
	}
	return c.doc(ctx, "POST", path, nil, r, ctype)
}

// Submit sends POST /v1/runs: spec as the part "spec", then the bundle
// file as the part "bundle", streamed (no bundle part when bundle is "":
// the spec names a base the server holds).
func (c *Client) Submit(ctx context.Context, spec any, bundle string) ([]byte, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, catalog.Internal.Wrap(err, "encode the spec: %v", err)
	}
	var f *os.File
	if bundle != "" {
		if f, err = os.Open(bundle); err != nil {
			return nil, fmt.Errorf("open the bundle: %w", err)
		}
		defer f.Close()
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			part, err := mw.CreateFormField("spec")
			if err == nil {
				_, err = part.Write(b)
			}
			if err == nil && f != nil {
				part, err = mw.CreateFormFile("bundle", "base.bundle")
				if err == nil {
					_, err = io.Copy(part, f)
				}
			}
			if err == nil {
				err = mw.Close()
			}
			return err
		}()
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	return c.doc(ctx, "POST", "/v1/runs", nil, pr, mw.FormDataContentType())
}

// Download writes the body of GET path (a file, such as a bundle) to w.
func (c *Client) Download(ctx context.Context, path string, w io.Writer) error {
	return c.Fetch(ctx, path, nil, w)
}

// doc sends one request and reads its JSON document.
func (c *Client) doc(ctx context.Context, method, path string, query url.Values, body io.Reader, ctype string) ([]byte, error) {
	resp, err := c.send(ctx, method, path, query, body, ctype, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return c.read(resp)
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body io.Reader, ctype, lastID string) (*http.Response, error) {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, catalog.Internal.Wrap(err, "request: %v", err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transport(err)
	}
	return resp, nil
}

// read reads an answer: its document, or its catalog error.
func (c *Client) read(resp *http.Response) ([]byte, error) {
	if c.Warn != nil {
		for _, w := range resp.Header.Values("Agentrun-Warning") {
			c.Warn(w)
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDoc+1))
	if err != nil {
		return nil, c.transport(err)
	}
	if len(b) > maxDoc {
		return nil, catalog.ServerProtocol.New("%s %s: the answer is over %d bytes", resp.Request.Method, resp.Request.URL.Path, maxDoc)
	}
	var doc struct {
		Error *catalog.Error `json:"error"`
	}
	isJSON := json.Valid(b) && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{"))
	if isJSON && json.Unmarshal(b, &doc) == nil && doc.Error != nil && doc.Error.Code != "" {
		return nil, c.serverError(resp, doc.Error)
	}
	if resp.StatusCode/100 != 2 || !isJSON {
		return nil, catalog.ServerProtocol.New("%s %s answered %s (%s), not an agentrun document", resp.Request.Method,
			resp.Request.URL.Path, resp.Status, strings.TrimSpace(resp.Header.Get("Content-Type")))
	}
	return b, nil
}

// serverError is the server's catalog error as the CLI shows its own: the
// exit status is one the catalog documents, and the fixes that speak of
// HTTP speak of the CLI's flags.
func (c *Client) serverError(resp *http.Response, e *catalog.Error) *catalog.Error {
	out := *e
	out.Exit = catalog.KnownExit(e.Exit)
	if out.Code == catalog.Unauthorized.Code {
		fix := "give the server's token with --token-file FILE (or AGENTRUN_SERVER_TOKEN_FILE)"
		if c.token != "" {
			fix = "the token sent is not the server's: check the file given to --token-file (or AGENTRUN_SERVER_TOKEN_FILE)"
		}
		return out.WithFix("%s", fix)
	}
	return &out
}

// transport turns a failure to talk to the server into a catalog error.
func (c *Client) transport(err error) error {
	var ce *catalog.Error
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		recordHdr  tls.RecordHeaderError
		verifyFail *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verifyFail):
		return catalog.ServerTLS.Wrap(err, "%s: %v", c.base, err)
	case errors.As(err, &recordHdr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return catalog.ServerTLS.Wrap(err, "%s: %v", c.base, err).
			WithFix("the server does not speak TLS on this port: use http:// (or start it with --tls-cert and --tls-key)")
	}
	// Refused, reset, unresolvable, timed out: the server is not there.
	return catalog.ServerUnreachable.Wrap(err, "%s: %v", c.base, err)
}
