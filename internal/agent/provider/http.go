package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
)

// Retry bounds the retries of one request on 429, 5xx and connection
// errors. The zero value means DefaultRetry.
type Retry struct {
	Attempts int           // total tries, including the first
	Base     time.Duration // first backoff; doubled each time
	Max      time.Duration // cap of one backoff (also of Retry-After)
}

// DefaultRetry is what providers use unless told otherwise.
var DefaultRetry = Retry{Attempts: 4, Base: 500 * time.Millisecond, Max: 8 * time.Second}

func (r Retry) norm() Retry {
	if r.Attempts <= 0 {
		return DefaultRetry
	}
	return r
}

// maxBody bounds what is read of one response.
const maxBody = 32 << 20

// HTTPError is a non-2xx answer after retries. Body is a prefix of the
// response body (never the request, so never a key).
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("http %d: %s", e.Status, e.Body)
}

// Send posts (or gets, when body is nil) and returns the response body of a
// 2xx answer. It retries per policy; a connection failure after the last
// try is catalog.ModelUnreachable; other non-2xx answers are *HTTPError for
// the provider to classify. headers carry the key: they are never part of an
// error.
func Send(ctx context.Context, hc *http.Client, policy Retry, method, url string, headers map[string]string, body []byte) ([]byte, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	policy = policy.norm()
	var lastErr error
	for try := 0; try < policy.Attempts; try++ {
		if try > 0 {
			wait := backoff(policy, try, lastErr)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, rd)
		if err != nil {
			return nil, catalog.ModelUnreachable.Wrap(err, "bad base URL %q", url)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = &connError{err: err}
			continue
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = &connError{err: err}
			continue
		}
		if resp.StatusCode/100 == 2 {
			return data, nil
		}
		he := &HTTPError{Status: resp.StatusCode, Body: Clip(string(data), 2000)}
		if resp.Header.Get("x-should-retry") == "false" {
			// The server (the model gateway, the providers' APIs) says
			// another try would fare no better, as their SDKs honour.
			return nil, he
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			lastErr = &retryAfter{HTTPError: he, after: parseRetryAfter(resp.Header.Get("Retry-After"))}
			continue
		}
		return nil, he
	}
	var ce *connError
	if errors.As(lastErr, &ce) {
		return nil, catalog.ModelUnreachable.Wrap(ce.err, "%s %s: %s", method, redactURL(url), ce.err)
	}
	var ra *retryAfter
	if errors.As(lastErr, &ra) {
		return nil, ra.HTTPError
	}
	return nil, lastErr
}

type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }

type retryAfter struct {
	*HTTPError
	after time.Duration
}

func backoff(p Retry, try int, last error) time.Duration {
	d := p.Base << (try - 1)
	var ra *retryAfter
	if errors.As(last, &ra) && ra.after > 0 {
		d = ra.after
	}
	if d > p.Max {
		d = p.Max
	}
	return d
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

func redactURL(u string) string {
	if i := strings.Index(u, "?"); i >= 0 {
		return u[:i]
	}
	return u
}

// Clip cuts s to n bytes, marking the cut with an ellipsis.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// NotLoaded builds catalog.ModelNotLoaded naming what the server has.
func NotLoaded(model string, have []ModelInfo) error {
	names := make([]string, 0, len(have))
	for _, m := range have {
		names = append(names, m.ID)
	}
	e := catalog.ModelNotLoaded.New("model %q is not available", model)
	if len(names) > 0 {
		list := strings.Join(names, ", ")
		if len(list) > 600 {
			list = list[:600] + "…"
		}
		e.Cause += "; the server offers: " + list
	} else {
		e.Cause += "; the server lists no models (load one first)"
	}
	return e
}

// LooksLikeModelMissing reports whether an error body says the model is not
// there (OpenAI, vLLM, Ollama, LM Studio and Anthropic wordings).
func LooksLikeModelMissing(status int, body string) bool {
	b := strings.ToLower(body)
	if status == http.StatusNotFound {
		return strings.Contains(b, "model") || b == ""
	}
	if status == http.StatusBadRequest || status == http.StatusUnprocessableEntity {
		return strings.Contains(b, "model") && (strings.Contains(b, "not found") ||
			strings.Contains(b, "does not exist") || strings.Contains(b, "not loaded") ||
			strings.Contains(b, "no models loaded") || strings.Contains(b, "model_not_found"))
	}
	return false
}
