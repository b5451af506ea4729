// Package openai is the OpenAI-compatible chat completions provider (LM
// Studio, Ollama, vLLM, llama.cpp server, OpenRouter, OpenAI) with function
// calling.
//
// Contract: one Chat call is one POST /chat/completions (stream off), with
// bounded retries on 429/5xx/connection errors. Requests are encoded
// deterministically from the messages so that a conversation's earlier
// messages are byte-identical from one request to the next (prompt caches
// depend on it). Reasoning a server returned (reasoning_content or
// reasoning) is sent back in the same field.
//
// It must never put the API key anywhere but the Authorization header: not
// in errors, not in logs.
package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/catalog"
)

// DefaultBaseURL is LM Studio's local server.
const DefaultBaseURL = "http://localhost:1234/v1"

// Config of a client.
type Config struct {
	BaseURL    string // default DefaultBaseURL; ends before /chat/completions
	APIKey     string // optional for local servers
	HTTPClient *http.Client
	Retry      provider.Retry
}

// Client implements provider.Provider.
type Client struct {
	ep   provider.Endpoint
	wire provider.Wire
}

// New returns a client.
func New(c Config) *Client {
	cl := &Client{ep: provider.Endpoint{
		Base:   cmp.Or(strings.TrimRight(c.BaseURL, "/"), DefaultBaseURL),
		Client: c.HTTPClient,
		Retry:  c.Retry,
	}}
	cl.wire = provider.Wire{Path: "/chat/completions", What: "chat request", Encode: EncodeRequest, Decode: DecodeResponse, Models: cl.Models}
	if c.APIKey != "" {
		cl.ep.Headers = map[string]string{"Authorization": "Bearer " + c.APIKey}
	} else {
		cl.wire.AuthHint = " and no key is set"
	}
	return cl
}

func (c *Client) Name() string { return "openai" }

// Wire types. Field order is fixed, so encoding is deterministic.
type wireFunc struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
type wireToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function wireFunc `json:"function"`
}
type wireMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	Reasoning        string         `json:"reasoning,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	Name             string         `json:"name,omitempty"`
}
type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}
type wireRequest struct {
	Model       string        `json:"model"`
	Messages    []wireMessage `json:"messages"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Stream      bool          `json:"stream"`
}
type wireResponse struct {
	Choices []struct {
		Message struct {
			Content          *string        `json:"content"`
			ReasoningContent string         `json:"reasoning_content"`
			Reasoning        string         `json:"reasoning"`
			ToolCalls        []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// EncodeRequest is the exact body Chat sends (exported for tests that
// compare requests byte for byte).
func EncodeRequest(req provider.Request) ([]byte, error) {
	w := wireRequest{Model: req.Model, Temperature: req.Temperature, MaxTokens: req.MaxTokens}
	if req.System != "" {
		s := req.System
		w.Messages = append(w.Messages, wireMessage{Role: "system", Content: &s})
	}
	for _, m := range req.Messages {
		content := m.Content
		wm := wireMessage{Role: string(m.Role), Content: &content, ToolCallID: m.ToolCallID}
		if m.Role == provider.RoleTool {
			wm.Name = m.Name
		}
		switch m.ReasoningField {
		case "reasoning":
			wm.Reasoning = m.Reasoning
		default:
			wm.ReasoningContent = m.Reasoning
		}
		for _, tc := range m.ToolCalls {
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunc{Name: tc.Name, Arguments: tc.Arguments}})
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		var wt wireTool
		wt.Type = "function"
		wt.Function.Name = t.Name
		wt.Function.Description = t.Description
		wt.Function.Parameters = t.Parameters
		w.Tools = append(w.Tools, wt)
	}
	return json.Marshal(w)
}

// Chat performs one turn.
func (c *Client) Chat(ctx context.Context, req provider.Request) (*provider.Response, error) {
	return c.ep.Chat(ctx, req, c.wire)
}

// DecodeResponse reads a chat completion.
func DecodeResponse(data []byte) (*provider.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, catalog.ModelProtocol.Wrap(err, "chat completion is not JSON: %s", provider.Clip(string(data), 200))
	}
	if w.Error != nil && len(w.Choices) == 0 {
		return nil, catalog.ModelProtocol.New("server error: %s", provider.Clip(w.Error.Message, 300))
	}
	if len(w.Choices) == 0 {
		return nil, catalog.ModelProtocol.New("chat completion has no choices")
	}
	ch := w.Choices[0]
	out := &provider.Response{}
	out.Message.Role = provider.RoleAssistant
	if ch.Message.Content != nil {
		out.Message.Content = *ch.Message.Content
	}
	switch {
	case ch.Message.ReasoningContent != "":
		out.Message.Reasoning, out.Message.ReasoningField = ch.Message.ReasoningContent, "reasoning_content"
	case ch.Message.Reasoning != "":
		out.Message.Reasoning, out.Message.ReasoningField = ch.Message.Reasoning, "reasoning"
	}
	for _, tc := range ch.Message.ToolCalls {
		out.Message.ToolCalls = append(out.Message.ToolCalls, provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	switch ch.FinishReason {
	case "stop", "eos":
		out.FinishReason = provider.FinishStop
	case "tool_calls", "function_call":
		out.FinishReason = provider.FinishToolCall
	case "length":
		out.FinishReason = provider.FinishLength
	default:
		out.FinishReason = provider.FinishOther
	}
	if w.Usage != nil {
		out.UsageKnown = true
		out.Usage = provider.Usage{PromptTokens: w.Usage.PromptTokens, CompletionTokens: w.Usage.CompletionTokens, CachedTokens: -1}
		if w.Usage.PromptTokensDetails != nil {
			out.Usage.CachedTokens = w.Usage.PromptTokensDetails.CachedTokens
		}
	} else {
		out.Usage = provider.Usage{PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1}
	}
	return out, nil
}
