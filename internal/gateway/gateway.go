package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// KeyPrefix starts every placeholder key: a placeholder is KeyPrefix and
// the run's token.
const KeyPrefix = "agentrun-gateway-"

// NewToken returns a fresh random run token.
func NewToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Credential is how the real key is put on a forwarded request.
type Credential struct {
	// Header is the header that carries it: "x-api-key" (Anthropic),
	// "authorization" (Bearer: OpenAI, OAuth tokens) or "x-goog-api-key"
	// (Gemini). "" sends none (a local model server without a key).
	Header string
	Value  string
	// Source names where the value came from, for messages (never the
	// value): "ANTHROPIC_API_KEY", "key file ~/.x", ...
	Source string
	// Extra headers go with this kind of credential (added to a header
	// the request already has, comma-separated).
	Extra map[string]string
}

// Route is one upstream.
type Route struct {
	// Upstream is the base URL forwarded to: <route>/<rest> goes to
	// Upstream + "/" + <rest>, or, for a Base, <route>/v1/<rest> goes to
	// Upstream + "/" + <rest> (run.RouteSpec.Base).
	Upstream   *url.URL
	Base       bool
	Credential Credential
	// Server names the model server for capacity ("" = no limit) and
	// MaxConcurrent its slots.
	Server        string
	MaxConcurrent int
	// Prices for this route's models.
	Prices Prices
}

// Budget bounds a run's model use; zero fields are unbounded.
type Budget struct {
	MaxTokens int64   // input + output tokens
	MaxCost   float64 // US dollars
}

// Event is something the gateway reports for the run's journal.
type Event struct {
	Kind    string         // "usage", "capacity_wait", "budget_exceeded", "refused", "upstream_error", "model_failing", "unpriced"
	Message string         // for people
	Data    map[string]any // for machines
}

// Options configure a gateway.
type Options struct {
	// Token is the run's token; requests must carry KeyPrefix+Token as
	// their credential.
	Token  string
	Routes map[string]Route
	Budget Budget
	// Spent is the usage recorded before this gateway (a resumed run).
	Spent *Usage
	// Capacity shares model servers' slots (nil: unlimited).
	Capacity Capacity
	// OnEvent is called for every event (never with a key in it).
	OnEvent func(Event)
	// OnExceeded is called once, when a request is refused for the budget.
	OnExceeded func(reason string)
	// OnFailing is called once, when the model server fails the agent in
	// a way its retries cannot mend (see Failing).
	OnFailing func(reason string)
	// UnreachableFor is how long the model requests to a model server
	// must all fail to reach it before the gateway gives up on it (0:
	// DefaultUnreachableFor).
	UnreachableFor time.Duration
	// Transport reaches the upstreams (nil: a default transport that
	// ignores proxy variables).
	Transport http.RoundTripper
	// Redial are the waits before each new try of a request whose
	// connection to the upstream could not be made (nil: redialDelays;
	// empty: none).
	Redial []time.Duration
}

// Gateway is one run's model gateway.
type Gateway struct {
	o      Options
	proxy  *httputil.ReverseProxy
	placeh []byte

	mu       sync.Mutex
	usage    Usage
	exceeded string
	unpriced map[string]bool
	health   map[string]*health // by route
	failing  string

	srv *http.Server
	ln  net.Listener
}

type ctxKey int

const (
	keyRoute ctxKey = iota
	keyKind
)

// New makes a gateway; nothing listens until Serve.
func New(o Options) (*Gateway, error) {
	if len(o.Token) < 16 {
		return nil, errors.New("gateway: the run token is missing or too short")
	}
	if o.OnEvent == nil {
		o.OnEvent = func(Event) {}
	}
	if o.OnExceeded == nil {
		o.OnExceeded = func(string) {}
	}
	if o.OnFailing == nil {
		o.OnFailing = func(string) {}
	}
	if o.UnreachableFor <= 0 {
		o.UnreachableFor = DefaultUnreachableFor
	}
	tr := o.Transport
	if tr == nil {
		tr = HostNet{}.Transport() // the upstream is dialled directly
	}
	redial := o.Redial
	if redial == nil {
		redial = redialDelays
	}
	g := &Gateway{o: o, placeh: []byte(KeyPrefix + o.Token), unpriced: map[string]bool{}, health: map[string]*health{}}
	if o.Spent != nil {
		g.usage = *o.Spent.Clone()
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      redialer{next: tr, delays: redial},
		FlushInterval:  -1, // streams pass through as they come
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.upstreamError,
	}
	return g, nil
}

// Placeholder is the key the sandbox gets.
func (g *Gateway) Placeholder() string { return string(g.placeh) }

// Listen serves the gateway on a new unix socket at path (mode 0600).
func (g *Gateway) Listen(path string) error {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("gateway: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("gateway: %w", err)
	}
	g.ServeListener(ln)
	return nil
}

// ServeListener serves the gateway on ln until Close.
func (g *Gateway) ServeListener(ln net.Listener) {
	g.ln = ln
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	go g.srv.Serve(ln)
}

// Close stops the gateway, cutting requests in flight.
func (g *Gateway) Close() error {
	if g.srv == nil {
		return nil
	}
	return g.srv.Close()
}

// Usage returns the run's usage so far (including Options.Spent).
func (g *Gateway) Usage() Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return *g.usage.Clone()
}

// Exceeded says why the budget is spent ("" while it is not).
func (g *Gateway) Exceeded() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.exceeded
}

// maxRequestBody bounds a request body (a long conversation is a few MiB).
const maxRequestBody = 64 << 20

// ServeHTTP implements http.Handler: /<route>/<rest>.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	route, ok := g.o.Routes[name]
	kind := kindOf(r.Method, "/"+rest)
	if !ok {
		g.refuse(w, kind, http.StatusNotFound, fmt.Sprintf("agentrun gateway: no route %q; this run's routes are %s", name, strings.Join(g.routeNames(), ", ")))
		return
	}
	if !g.authorized(r) {
		g.o.OnEvent(Event{Kind: "refused", Message: "a model request without the run's token was refused", Data: map[string]any{"route": name, "path": "/" + rest}})
		g.refuse(w, kind, http.StatusUnauthorized, "agentrun gateway: this request does not carry the run's gateway key; use the API key agentrun set for the agent")
		return
	}
	if kind != KindOther {
		if why := g.overBudget(); why != "" {
			g.refuse(w, kind, http.StatusBadRequest, "agentrun gateway: "+why)
			return
		}
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
		if err != nil {
			g.refuse(w, kind, http.StatusBadRequest, "agentrun gateway: reading the request: "+err.Error())
			return
		}
		if len(b) > maxRequestBody {
			g.refuse(w, kind, http.StatusRequestEntityTooLarge, "agentrun gateway: request body over 64 MiB")
			return
		}
		body = b
	}
	if kind == KindChat {
		body = includeUsage(body)
	}
	if kind != KindOther && route.Server != "" && route.MaxConcurrent > 0 && g.o.Capacity != nil {
		t0 := time.Now()
		release, err := g.o.Capacity.Acquire(r.Context(), route.Server, route.MaxConcurrent)
		if err != nil {
			g.refuse(w, kind, http.StatusServiceUnavailable, "agentrun gateway: waiting for the model server: "+err.Error())
			return
		}
		defer release()
		if waited := time.Since(t0); waited >= 20*time.Millisecond {
			g.o.OnEvent(Event{Kind: "capacity_wait", Message: fmt.Sprintf("waited %s for one of %d request slots of %s", waited.Round(time.Millisecond), route.MaxConcurrent, route.Server),
				Data: map[string]any{"server": route.Server, "max_concurrent": route.MaxConcurrent, "wait": waited.String()}})
		}
	}
	rewindable(r, body)
	r.ContentLength = int64(len(body))
	r.Header.Del("Content-Length")
	ctx := context.WithValue(r.Context(), keyRoute, name)
	ctx = context.WithValue(ctx, keyKind, kind)
	req := r.WithContext(ctx)
	req.URL.Path = "/" + rest
	req.URL.RawPath = ""
	// ServeHTTP returns once the whole response has passed (metered on
	// the way), so a capacity slot is held until then.
	g.proxy.ServeHTTP(w, req)
}

func (g *Gateway) routeNames() []string {
	var n []string
	for k := range g.o.Routes {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// authorized reports whether r carries the placeholder (in any of the
// places the protocols put a key).
func (g *Gateway) authorized(r *http.Request) bool {
	for _, v := range []string{r.Header.Get("x-api-key"), r.Header.Get("x-goog-api-key"), r.URL.Query().Get("key"), bearer(r.Header.Get("Authorization"))} {
		if v != "" && subtle.ConstantTimeCompare([]byte(v), g.placeh) == 1 {
			return true
		}
	}
	return false
}

func bearer(v string) string {
	if s, ok := strings.CutPrefix(v, "Bearer "); ok {
		return strings.TrimSpace(s)
	}
	if s, ok := strings.CutPrefix(v, "bearer "); ok {
		return strings.TrimSpace(s)
	}
	return ""
}

// rewrite points the request at the route's upstream with the real key.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	name, _ := pr.In.Context().Value(keyRoute).(string)
	route := g.o.Routes[name]
	out := pr.Out
	up := route.Upstream
	out.URL.Scheme, out.URL.Host = up.Scheme, up.Host
	out.URL.Path = upstreamPath(up.Path, route.Base, pr.In.URL.Path)
	out.URL.RawPath = ""
	q := out.URL.Query()
	if q.Has("key") {
		q.Del("key")
		out.URL.RawQuery = q.Encode()
	}
	out.Host = up.Host
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Cookie", "Proxy-Authorization"} {
		out.Header.Del(h)
	}
	// What the sandbox says about itself stays in the sandbox.
	out.Header.Del("X-Forwarded-For")
	// The agent's Accept-Encoding (gzip, br) would have the answer come
	// compressed, past the meter: without it the transport asks for gzip
	// and hands the meter (and the agent) the plain body.
	out.Header.Del("Accept-Encoding")
	c := route.Credential
	switch strings.ToLower(c.Header) {
	case "":
	case "authorization":
		out.Header.Set("Authorization", "Bearer "+c.Value)
	default:
		out.Header.Set(c.Header, c.Value)
	}
	for k, v := range c.Extra {
		if have := strings.Join(out.Header.Values(k), ","); have != "" {
			if slices.Contains(strings.Split(strings.ReplaceAll(have, " ", ""), ","), v) {
				v = have
			} else {
				v = have + "," + v
			}
		}
		out.Header.Set(k, v)
	}
}

func (g *Gateway) modifyResponse(resp *http.Response) error {
	kind, _ := resp.Request.Context().Value(keyKind).(Kind)
	name, _ := resp.Request.Context().Value(keyRoute).(string)
	if kind != KindOther {
		// After the event of the answer itself, if any.
		defer g.answered(name, resp.StatusCode)
	}
	if kind == KindOther || resp.StatusCode >= 300 {
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			route := g.o.Routes[name]
			up, src := redact(route.Upstream), route.Credential.Source
			msg := fmt.Sprintf("the model server %s refused the key from %s (%s)", up, src, resp.Status)
			if src == "" {
				msg = fmt.Sprintf("the model server %s refused a request without a key (%s)", up, resp.Status)
			}
			g.o.OnEvent(Event{Kind: "upstream_error", Message: msg,
				Data: map[string]any{"route": name, "status": resp.StatusCode, "upstream": up, "key": src}})
		}
		if resp.StatusCode == http.StatusNotFound && kind != KindOther {
			// A model request to a path the server does not have, or for
			// a model it does not serve: the agent's error says neither.
			up, path := redact(g.o.Routes[name].Upstream), resp.Request.URL.Path
			g.o.OnEvent(Event{Kind: "upstream_error", Message: fmt.Sprintf("the model server %s answered 404 Not Found to POST %s: no such path, or no such model", up, path),
				Data: map[string]any{"route": name, "status": resp.StatusCode, "upstream": up, "path": path}})
		}
		return nil
	}
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	resp.Body = &meteredBody{rc: resp.Body, m: &meter{kind: kind}, stream: stream, done: func(m *meter) { g.record(name, m) }}
	return nil
}

func (g *Gateway) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	name, _ := r.Context().Value(keyRoute).(string)
	kind, _ := r.Context().Value(keyKind).(Kind)
	if r.Context().Err() != nil {
		return // the agent went away
	}
	up := g.o.Routes[name].Upstream
	g.o.OnEvent(Event{Kind: "upstream_error", Message: fmt.Sprintf("the model server %s could not be reached: %v", redact(up), err),
		Data: map[string]any{"route": name, "upstream": redact(up)}})
	if kind != KindOther {
		g.unreached(name)
	}
	g.refuse(w, kind, http.StatusBadGateway, fmt.Sprintf("agentrun gateway: the model server %s could not be reached: %v", redact(up), err))
}

// redact is u without user info or query.
func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User, c.RawQuery = nil, ""
	return c.String()
}

// record adds one response's usage and checks the budget.
func (g *Gateway) record(route string, m *meter) {
	if !m.seen {
		return
	}
	t := m.tokens()
	model := m.model
	if model == "" {
		model = "unknown"
	}
	price, priced := g.o.Routes[route].Prices.Lookup(model)
	cost := Cost(price, t)
	g.mu.Lock()
	addTo(&g.usage, model, t, cost, priced)
	first := !priced && !g.unpriced[model]
	if first {
		g.unpriced[model] = true
	}
	g.mu.Unlock()
	if first {
		g.o.OnEvent(Event{Kind: "unpriced", Message: fmt.Sprintf("no price is known for model %q: its cost counts as 0 (add [prices.%q] to config.toml)", model, model),
			Data: map[string]any{"model": model}})
	}
}

// budgetAdvice ends the error an agent gets past the budget.
const budgetAdvice = "; raise it with agentrun resume --max-tokens/--max-cost"

// overBudget says why no more requests may go (and reports it once).
func (g *Gateway) overBudget() string {
	b := g.o.Budget
	g.mu.Lock()
	u := g.usage
	why := g.exceeded
	if why == "" {
		switch {
		case b.MaxTokens > 0 && u.Total() >= b.MaxTokens:
			why = fmt.Sprintf("the run's token budget is spent (%d of --max-tokens %d)", u.Total(), b.MaxTokens)
		case b.MaxCost > 0 && u.CostUSD >= b.MaxCost:
			why = fmt.Sprintf("the run's cost budget is spent ($%.4f of --max-cost $%g)", u.CostUSD, b.MaxCost)
		}
		if why != "" {
			g.exceeded = why
			g.mu.Unlock()
			g.o.OnEvent(Event{Kind: "budget_exceeded", Message: why, Data: map[string]any{"tokens": u.Total(), "cost_usd": u.CostUSD}})
			g.o.OnExceeded(why)
			return why + budgetAdvice
		}
	}
	g.mu.Unlock()
	if why != "" {
		why += budgetAdvice
	}
	return why
}

// refuse answers in the protocol's error format.
func (g *Gateway) refuse(w http.ResponseWriter, kind Kind, status int, msg string) {
	var body any
	switch kind {
	case KindAnthropic:
		typ := "invalid_request_error"
		switch status {
		case http.StatusUnauthorized:
			typ = "authentication_error"
		case http.StatusNotFound:
			typ = "not_found_error"
		case http.StatusBadGateway, http.StatusServiceUnavailable:
			typ = "api_error"
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	case KindGemini:
		st := "INVALID_ARGUMENT"
		switch status {
		case http.StatusUnauthorized:
			st = "UNAUTHENTICATED"
		case http.StatusNotFound:
			st = "NOT_FOUND"
		case http.StatusBadGateway, http.StatusServiceUnavailable:
			st = "UNAVAILABLE"
		}
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
	default:
		typ, code := "invalid_request_error", "invalid_request_error"
		switch status {
		case http.StatusUnauthorized:
			code = "invalid_api_key"
		case http.StatusBadRequest:
			code = "budget_exceeded"
		case http.StatusBadGateway, http.StatusServiceUnavailable:
			typ, code = "server_error", "server_error" // as OpenAI's own 5xx answers
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// includeUsage asks a streamed chat completion for its usage (the last
// chunk), so that it can be metered. Other bodies are left as they are.
func includeUsage(body []byte) []byte {
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return body
	}
	if string(req["stream"]) != "true" {
		return body
	}
	var so map[string]any
	_ = json.Unmarshal(req["stream_options"], &so)
	if v, ok := so["include_usage"].(bool); ok && v {
		return body
	}
	if so == nil {
		so = map[string]any{}
	}
	so["include_usage"] = true
	b, err := json.Marshal(so)
	if err != nil {
		return body
	}
	req["stream_options"] = b
	out, err := json.Marshal(req)
	if err != nil {
		return body
	}
	return out
}
