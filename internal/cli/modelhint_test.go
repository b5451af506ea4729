package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func TestModelHintOf(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	end1, end2 := at(10), at(30)
	failed := &run.Run{State: run.StateFailed, Reason: run.ReasonAgentFailed, Attempts: []run.Attempt{
		{N: 1, StartedAt: at(0), FinishedAt: &end1}, {N: 2, StartedAt: at(20), FinishedAt: &end2}}}
	upstream := func(s int, data map[string]any) run.Event {
		data["kind"] = "upstream_error"
		e := run.NewEvent(run.EventGateway, "", data)
		e.Time = at(s)
		return e
	}
	refused := func(s int) run.Event {
		return upstream(s, map[string]any{"route": "openai", "status": 401, "upstream": "http://127.0.0.1:1234", "key": "OPENAI_API_KEY"})
	}
	usage := run.NewEvent(run.EventGateway, "", map[string]any{"kind": "usage"})
	usage.Time = at(25)

	// Only the last attempt's errors count.
	if h := modelHintOf(failed, []run.Event{refused(5), usage}); h != nil {
		t.Errorf("an error of attempt 1 made a hint for attempt 2: %+v", h)
	}
	h := modelHintOf(failed, []run.Event{refused(5), refused(21), usage, refused(22), refused(40)})
	if h == nil || h.Errors != 2 || h.Status != 401 || h.Key != "OPENAI_API_KEY" || h.Upstream != "http://127.0.0.1:1234" ||
		!strings.Contains(h.Hint, "refused the key from OPENAI_API_KEY (401 Unauthorized, 2 times in attempt 2)") {
		t.Errorf("%+v", h)
	}
	// The last error is the one described.
	gone := upstream(23, map[string]any{"route": "openai", "upstream": "http://127.0.0.1:1234"})
	if h := modelHintOf(failed, []run.Event{refused(21), gone}); h == nil || h.Status != 0 || h.Errors != 2 ||
		!strings.Contains(h.Hint, "could not be reached (2 times in attempt 2): start the server") {
		t.Errorf("%+v", h)
	}
	// Journaled before the events named the server.
	old := upstream(21, map[string]any{"route": "anthropic", "status": 403})
	if h := modelHintOf(failed, []run.Event{old}); h == nil || h.Upstream != "of route anthropic" ||
		!strings.Contains(h.Hint, "the model server of route anthropic refused the agent's requests (403 Forbidden, once in attempt 2): set a valid key") {
		t.Errorf("%+v", h)
	}
	// 404: where the last request went, and the run's model.
	failed.Agent.Model = "qwen3-coder"
	notFound := upstream(21, map[string]any{"route": "openai", "status": 404, "upstream": "http://127.0.0.1:1234", "path": "/api/v4/v1/chat/completions"})
	if h := modelHintOf(failed, []run.Event{notFound}); h == nil || h.Status != 404 || h.Path != "/api/v4/v1/chat/completions" ||
		!strings.Contains(h.Hint, `answered 404 Not Found to the agent's model requests (once in attempt 2; the last to /api/v4/v1/chat/completions): check that it serves the model "qwen3-coder"`) {
		t.Errorf("%+v", h)
	}
	// 404 to the Responses API: codex's, which many servers lack.
	responses := upstream(21, map[string]any{"route": "openai", "status": 404, "upstream": "http://127.0.0.1:1234", "path": "/v1/responses"})
	if h := modelHintOf(failed, []run.Event{responses}); h == nil || !strings.Contains(h.Hint, "codex speaks only the OpenAI Responses API") ||
		!strings.Contains(h.Hint, "--agent qwen") || !strings.Contains(h.Hint, "to /v1/responses (once in attempt 2)") {
		t.Errorf("%+v", h)
	}
	// Nothing to say for a run that did not fail, or ran out of budget.
	for _, r := range []*run.Run{
		{State: run.StateSucceeded, Attempts: failed.Attempts},
		{State: run.StateFailed, Reason: run.ReasonBudgetExceeded, Attempts: failed.Attempts},
		{State: run.StateFailed, Reason: run.ReasonAgentFailed},
	} {
		if h := modelHintOf(r, []run.Event{refused(21)}); h != nil {
			t.Errorf("%s %s: %+v", r.State, r.Reason, h)
		}
	}
}
