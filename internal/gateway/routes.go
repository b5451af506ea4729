package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

// Route names: the wire protocol families.
const (
	RouteAnthropic = "anthropic"
	RouteOpenAI    = "openai"
	RouteGemini    = "gemini"
)

// RouteNames lists the routes a gateway can have.
var RouteNames = []string{RouteAnthropic, RouteOpenAI, RouteGemini}

// Public is the default route of each family: the provider's public API
// and where its key is looked for on the host, in order.
func Public(name string) (run.RouteSpec, bool) {
	switch name {
	case RouteAnthropic:
		return run.RouteSpec{Name: name, URL: "https://api.anthropic.com", Keys: []run.KeySource{
			{Env: "ANTHROPIC_API_KEY", Header: "x-api-key"},
			{Env: "CLAUDE_CODE_OAUTH_TOKEN", Header: "authorization", Extra: map[string]string{"anthropic-beta": "oauth-2025-04-20"}},
			{Env: "ANTHROPIC_AUTH_TOKEN", Header: "authorization"},
		}}, true
	case RouteOpenAI:
		return run.RouteSpec{Name: name, URL: "https://api.openai.com", Keys: []run.KeySource{
			{Env: "AGENTRUN_OPENAI_API_KEY", Header: "authorization"},
			{Env: "OPENAI_API_KEY", Header: "authorization"},
		}}, true
	case RouteGemini:
		return run.RouteSpec{Name: name, URL: "https://generativelanguage.googleapis.com", Keys: []run.KeySource{
			{Env: "GEMINI_API_KEY", Header: "x-goog-api-key"},
			{Env: "GOOGLE_API_KEY", Header: "x-goog-api-key"},
		}}, true
	}
	return run.RouteSpec{}, false
}

// KeyHeader is the header a route family's upstream takes a key in.
func KeyHeader(route string) string {
	switch route {
	case RouteAnthropic:
		return "x-api-key"
	case RouteGemini:
		return "x-goog-api-key"
	}
	return "authorization"
}

// ModelServerURL normalises a model server's URL to the root the
// protocols' paths are appended to: a trailing "/v1" or "/v1beta" (as LM
// Studio, Ollama and vLLM print their URLs) is dropped.
func ModelServerURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http:// or https:// URL", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q has credentials in it; name the key with api_key_env, api_key_file or api_key_command in config.toml", RedactRaw(raw))
	}
	u.RawQuery, u.Fragment = "", ""
	p := strings.TrimRight(u.Path, "/")
	for _, suf := range []string{"/v1beta", "/v1"} {
		p = strings.TrimSuffix(p, suf)
	}
	u.Path = p
	return u.String(), nil
}

// ServerURL is a model server's URL as the URL of a route of family
// (run.RouteSpec): the root the agent's paths are appended to
// (ModelServerURL), or, for an OpenAI-compatible API whose URL has a path
// that does not end in /v1, that API's base (base true), as an OpenAI
// client takes it: what comes before /chat/completions
// (https://open.bigmodel.cn/api/paas/v4,
// https://generativelanguage.googleapis.com/v1beta/openai). A server's
// root stays a root, whose API is under /v1 (LM Studio, Ollama, vLLM and
// llama.cpp print their URLs either way).
func ServerURL(raw, family string) (u string, base bool, err error) {
	root, err := ModelServerURL(raw)
	if err != nil || family != RouteOpenAI {
		return root, false, err
	}
	pu, _ := url.Parse(strings.TrimSpace(raw)) // (ModelServerURL parsed it)
	p := strings.TrimRight(pu.Path, "/")
	if p == "" || strings.HasSuffix(p, "/v1") {
		return root, false, nil
	}
	pu.Path, pu.RawPath, pu.RawQuery, pu.Fragment = p, "", "", ""
	return pu.String(), true, nil
}

// URLFor is the upstream URL of the agent's path p ("/v1/models") on
// route rs.
func URLFor(rs run.RouteSpec, p string) string {
	u, err := url.Parse(rs.URL)
	if err != nil {
		return rs.URL + p
	}
	u.Path = upstreamPath(u.Path, rs.Base, p)
	u.RawPath = ""
	return u.String()
}

// upstreamPath is where the agent's path p goes on an upstream whose
// URL's path is up: appended to it, or for a base, in place of p's /v1.
func upstreamPath(up string, base bool, p string) string {
	if base {
		if rest, ok := strings.CutPrefix(p, "/v1"); ok && (rest == "" || rest[0] == '/') {
			p = rest
		}
	}
	return strings.TrimRight(up, "/") + p
}

// RedactRaw is the URL raw without user info, for messages.
func RedactRaw(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the URL)"
	}
	u.User = nil
	return u.String()
}

// Getenv reads the environment handed to the supervisor.
type Getenv func(string) string

// Available says whether some source of spec's keys can give a value now
// (an environment variable set, a key file readable, a key command named),
// and otherwise which sources were tried. A spec without keys needs none.
func Available(spec run.RouteSpec, getenv Getenv) (bool, []string) {
	if len(spec.Keys) == 0 {
		return true, nil
	}
	var tried []string
	for _, k := range spec.Keys {
		switch {
		case k.Env != "" && getenv(k.Env) != "":
			return true, nil
		case k.File != "":
			if f, err := os.Open(expandHome(k.File, getenv)); err == nil {
				f.Close()
				return true, nil
			}
		case k.Command != "":
			return true, nil
		}
		tried = append(tried, k.Describe())
	}
	return false, tried
}

// ResolveKey reads the first key spec's sources give. It runs a key
// command with a 30 s limit. ok is false when none gives one.
func ResolveKey(ctx context.Context, spec run.RouteSpec, getenv Getenv) (Credential, bool, error) {
	var errs []error
	for _, k := range spec.Keys {
		var v string
		switch {
		case k.Env != "":
			v = getenv(k.Env)
		case k.File != "":
			b, err := os.ReadFile(expandHome(k.File, getenv))
			if err != nil {
				errs = append(errs, fmt.Errorf("key file %s: %w", k.File, err))
				continue
			}
			v = string(b)
		case k.Command != "":
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			cmd := exec.CommandContext(cctx, "sh", "-c", k.Command)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			// A child the command left behind keeps its output open:
			// stop waiting for it soon after the command is killed.
			cmd.WaitDelay = time.Second
			err := cmd.Run()
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("key command: %v: %s", err, strings.TrimSpace(stderr.String())))
				continue
			}
			v = out.String()
		}
		if v = strings.TrimSpace(v); v != "" {
			return Credential{Header: k.Header, Value: v, Source: k.Describe(), Extra: k.Extra}, true, nil
		}
	}
	return Credential{}, false, errors.Join(errs...)
}

func expandHome(p string, getenv Getenv) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h := getenv("HOME"); h != "" {
			return filepath.Join(h, rest)
		}
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}

// Routes builds the gateway's routes from the run's spec, reading every
// key on the host. A route whose key sources give nothing is an error
// naming them.
func Routes(ctx context.Context, spec *run.GatewaySpec, getenv Getenv) (map[string]Route, error) {
	out := map[string]Route{}
	for _, rs := range spec.Routes {
		u, err := url.Parse(rs.URL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("route %s: bad upstream URL %q", rs.Name, rs.URL)
		}
		rt := Route{Upstream: u, Base: rs.Base, Server: rs.Server, MaxConcurrent: rs.MaxConcurrent,
			Prices: Prices{Overrides: spec.Prices, Free: rs.Server != ""}}
		if len(rs.Keys) > 0 {
			cred, ok, err := ResolveKey(ctx, rs, getenv)
			if !ok {
				var names []string
				for _, k := range rs.Keys {
					names = append(names, k.Describe())
				}
				if err != nil {
					return nil, fmt.Errorf("route %s: no key for %s (tried %s): %w", rs.Name, redact(u), strings.Join(names, ", "), err)
				}
				return nil, fmt.Errorf("route %s: no key for %s (tried %s)", rs.Name, redact(u), strings.Join(names, ", "))
			}
			rt.Credential = cred
		}
		out[rs.Name] = rt
	}
	return out, nil
}
