package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// modelHint says, for a failed run, that the model server refused its
// agent's requests or could not be reached during the last attempt, as
// the run's model gateway journaled it. An agent CLI then exits with a
// code of its own, and its output names neither the server nor the fix:
// its requests went to the gateway.
type modelHint struct {
	// Upstream is the model server (without user info or query); Status
	// the HTTP status it refused with (401 or 403) or 404 (no such path or
	// model), 0 when it could not be reached; Key where the key came from
	// ("" when agentrun has none for that server).
	Upstream string `json:"upstream"`
	Status   int    `json:"status,omitempty"`
	Key      string `json:"key,omitempty"`
	// Path is where a request answered 404 went on the server.
	Path string `json:"path,omitempty"`
	// Errors is how many of the attempt's requests failed so.
	Errors int    `json:"errors"`
	Hint   string `json:"hint"`

	named bool // the journal named the server and the key's source
}

// modelHintOf is the hint for r from its journal, nil when there is
// nothing to say: the run did not fail, or no request of its last
// attempt was refused or failed to reach the model server.
func modelHintOf(r *run.Run, evs []run.Event) *modelHint {
	a := r.LastAttempt()
	if r.State != run.StateFailed || r.Reason == run.ReasonBudgetExceeded || a == nil {
		return nil
	}
	var h *modelHint
	for _, e := range evs {
		if e.Type != run.EventGateway || e.Time.Before(a.StartedAt) || (a.FinishedAt != nil && e.Time.After(*a.FinishedAt)) {
			continue
		}
		var d struct {
			Kind     string `json:"kind"`
			Route    string `json:"route"`
			Upstream string `json:"upstream"`
			Status   int    `json:"status"`
			Key      string `json:"key"`
			Path     string `json:"path"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.Kind != "upstream_error" {
			continue
		}
		named := d.Upstream != ""
		if !named { // journaled before the events named the server
			d.Upstream = "of route " + d.Route
		}
		n := 1
		if h != nil {
			n = h.Errors + 1
		}
		h = &modelHint{Upstream: d.Upstream, Status: d.Status, Key: d.Key, Path: d.Path, Errors: n, named: named}
	}
	if h == nil {
		return nil
	}
	times := "once"
	if h.Errors > 1 {
		times = fmt.Sprintf("%d times", h.Errors)
	}
	status := fmt.Sprintf("%d %s", h.Status, http.StatusText(h.Status))
	switch {
	case h.Status == 0:
		h.Hint = fmt.Sprintf("the model server %s could not be reached (%s in attempt %d): %s", h.Upstream, times, a.N, catalog.ModelUnreachable.Fix)
	case h.Status == http.StatusNotFound && strings.HasSuffix(h.Path, "/responses"):
		h.Hint = fmt.Sprintf("the model server %s answered 404 Not Found to the agent's requests to %s (%s in attempt %d): codex speaks only the OpenAI Responses API, which this server may not serve; run codex on a server that does (vLLM, Ollama, recent LM Studio), or use a profile that speaks chat completions (--agent qwen, --agent opencode); else check that it serves the model %q",
			h.Upstream, h.Path, times, a.N, r.Agent.Model)
	case h.Status == http.StatusNotFound:
		h.Hint = fmt.Sprintf("the model server %s answered 404 Not Found to the agent's model requests (%s in attempt %d; the last to %s): check that it serves the model %q (its model list names it) and that its API is at that path (for an OpenAI-compatible API, give the URL an OpenAI client takes as its base: the server's root or .../v1, or the provider's own, such as .../api/paas/v4)",
			h.Upstream, times, a.N, h.Path, r.Agent.Model)
	case !h.named:
		h.Hint = fmt.Sprintf("the model server %s refused the agent's requests (%s, %s in attempt %d): %s", h.Upstream, status, times, a.N, catalog.ModelAuth.Fix)
	case h.Key == "":
		h.Hint = fmt.Sprintf("the model server %s refused requests without a key (%s, %s in attempt %d): agentrun has no key for it; name one in config.toml ([model_servers.NAME] api_key_env, api_key_file or api_key_command)",
			h.Upstream, status, times, a.N)
	default:
		h.Hint = fmt.Sprintf("the model server %s refused the key from %s (%s, %s in attempt %d): give %s a key the server accepts, or name another source in config.toml ([providers.NAME] or [model_servers.NAME] api_key_env, api_key_file or api_key_command)",
			h.Upstream, h.Key, status, times, a.N, h.Key)
	}
	return h
}

// failureHints are the network and model hints for r (see networkHint and
// modelHintOf). evs is the run's journal when the caller has read it
// (nil: read here if needed). When the model server failed the agent,
// output that reads like a failed connection is the gateway's own error
// reaching the agent, and no --allow would help: the network hint then
// names only what an allowlist denied.
func (app *App) failureHints(ctx context.Context, env *Env, r *run.Run, evs []run.Event) (*networkHint, *modelHint) {
	if r.State != run.StateFailed {
		return nil, nil
	}
	if evs == nil {
		evs, _ = env.Store.Events(ctx, r.ID, 0)
	}
	model := modelHintOf(r, evs)
	network := app.networkHint(ctx, env, r, evs)
	if model != nil && network != nil && network.Offline != "" {
		network = nil
	}
	return network, model
}
