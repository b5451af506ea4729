package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
)

// Models lists what the server offers, with context windows where /models
// says (vLLM's max_model_len, OpenRouter's context_length, LM Studio's
// loaded_context_length).
func (c *Client) Models(ctx context.Context) ([]provider.ModelInfo, error) {
	data, err := c.ep.Once(ctx, http.MethodGet, c.ep.Base+"/models", nil)
	if err != nil {
		return nil, err
	}
	var w struct {
		Data []struct {
			ID                  string `json:"id"`
			MaxModelLen         int    `json:"max_model_len"`
			ContextLength       int    `json:"context_length"`
			LoadedContextLength int    `json:"loaded_context_length"`
			State               string `json:"state"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, nil
	}
	out := make([]provider.ModelInfo, 0, len(w.Data))
	for _, m := range w.Data {
		mi := provider.ModelInfo{ID: m.ID, Loaded: m.State == "" || m.State == "loaded"}
		switch {
		case m.LoadedContextLength > 0:
			mi.ContextWindow = m.LoadedContextLength
		case m.MaxModelLen > 0:
			mi.ContextWindow = m.MaxModelLen
		case m.ContextLength > 0:
			mi.ContextWindow = m.ContextLength
		}
		out = append(out, mi)
	}
	return out, nil
}

// ContextWindow asks the server for the model's context window in tokens;
// 0 when it does not say. LM Studio reports the loaded context length on
// its native API, llama.cpp in /props, vLLM and others in /models, Ollama
// in /api/show.
func (c *Client) ContextWindow(ctx context.Context, model string) int {
	root := strings.TrimSuffix(c.ep.Base, "/v1")
	// LM Studio native API: the context length the model is loaded with.
	if data, err := c.ep.Once(ctx, http.MethodGet, root+"/api/v0/models/"+model, nil); err == nil {
		var m struct {
			LoadedContextLength int `json:"loaded_context_length"`
			MaxContextLength    int `json:"max_context_length"`
		}
		if json.Unmarshal(data, &m) == nil && m.LoadedContextLength > 0 {
			return m.LoadedContextLength
		}
	}
	// llama.cpp server: the context the server runs with (its /models
	// only has the training context, which may be larger).
	if data, err := c.ep.Once(ctx, http.MethodGet, root+"/props", nil); err == nil {
		var p struct {
			Settings struct {
				NCtx int `json:"n_ctx"`
			} `json:"default_generation_settings"`
		}
		if json.Unmarshal(data, &p) == nil && p.Settings.NCtx > 0 {
			return p.Settings.NCtx
		}
	}
	if ms, err := c.Models(ctx); err == nil {
		for _, m := range ms {
			if m.ID == model && m.ContextWindow > 0 {
				return m.ContextWindow
			}
		}
	}
	// Ollama: model info carries <arch>.context_length.
	body, _ := json.Marshal(map[string]string{"model": model})
	if data, err := c.ep.Once(ctx, http.MethodPost, root+"/api/show", body); err == nil {
		var s struct {
			ModelInfo  map[string]any `json:"model_info"`
			Parameters string         `json:"parameters"`
		}
		if json.Unmarshal(data, &s) == nil {
			for _, line := range strings.Split(s.Parameters, "\n") {
				f := strings.Fields(line)
				if len(f) == 2 && f[0] == "num_ctx" {
					if n := atoi(f[1]); n > 0 {
						return n
					}
				}
			}
			for k, v := range s.ModelInfo {
				if strings.HasSuffix(k, ".context_length") {
					if f, ok := v.(float64); ok && f > 0 {
						return int(f)
					}
				}
			}
		}
	}
	return 0
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int(r-'0')
		if n > 1<<30 {
			return 0
		}
	}
	return n
}
