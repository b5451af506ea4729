package submit

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
)

// checkBuiltin validates the built-in agent's settings at submit time
// (model given, provider known) and returns its provider. Its key is the
// gateway's to find.
func (s *Service) checkBuiltin(spec run.AgentSpec) (provider.Kind, error) {
	if strings.TrimSpace(spec.Model) == "" {
		return provider.Kind{}, catalog.NoModel.New("the built-in agent needs a model").WithFix("name one with %s", f("model"))
	}
	kind, ok := s.Providers.Lookup(spec.Provider)
	if !ok {
		return kind, catalog.Usage.New("unknown provider %q", spec.Provider).
			WithFix("name one of: %s (openai speaks to any OpenAI-compatible server)", strings.Join(s.Providers.Names(), ", "))
	}
	return kind, nil
}

// checkBuiltinModel asks the built-in agent's model server (a server the
// user named, not a provider's public API) which models it has: a model it
// lacks, or a key it refuses, is caught at submit rather than as failed
// attempts. A server that cannot list its models is not an error here.
func checkBuiltinModel(ctx context.Context, spec run.AgentSpec, rs run.RouteSpec, kind provider.Kind, getenv func(string) string) error {
	return checkServerModel(ctx, spec.Model, rs, getenv, kindLister(kind, rs))
}

// lister lists a model server's models with key.
type lister func(ctx context.Context, key string, client *http.Client) ([]provider.ModelInfo, error)

// kindLister lists with provider kind's own listing.
func kindLister(kind provider.Kind, rs run.RouteSpec) lister {
	return func(ctx context.Context, key string, client *http.Client) ([]provider.ModelInfo, error) {
		return kind.New(provider.Config{BaseURL: gateway.URLFor(rs, kind.URLPath), APIKey: key, HTTPClient: client}).Models(ctx)
	}
}

// checkServerModel asks the model server of rs (one the user named, not a
// provider's public API: "" Server is not asked) for its models with the
// route's key: 401 or 403 is catalog.ModelAuth, a list without model
// catalog.ModelNotLoaded. A server that cannot list its models, or does
// not within 5 s, is not an error here.
func checkServerModel(ctx context.Context, model string, rs run.RouteSpec, getenv func(string) string, list lister) error {
	if rs.Server == "" {
		return nil
	}
	key := ""
	if len(rs.Keys) > 0 {
		cred, ok, _ := gateway.ResolveKey(ctx, rs, getenv)
		if ok {
			key = cred.Value
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := &http.Client{Transport: gateway.NewHostNet(getenv).Transport()}
	defer client.CloseIdleConnections()
	have, err := list(lctx, key, client)
	var he *provider.HTTPError
	if errors.As(err, &he) && (he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden) {
		src := "no key is configured for it"
		if len(rs.Keys) > 0 {
			src = "its key comes from " + rs.Keys[0].Describe()
		}
		return catalog.ModelAuth.Wrap(err, "model server %s answered %s to the model list; %s", rs.Server, http.StatusText(he.Status), src)
	}
	if err != nil || len(have) == 0 {
		return nil
	}
	for _, m := range have {
		if m.ID == model {
			return nil
		}
	}
	return provider.NotLoaded(model, have)
}
