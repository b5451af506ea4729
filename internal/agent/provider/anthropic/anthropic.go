// Package anthropic is the Anthropic Messages API provider.
//
// Contract: one Chat call is one POST /v1/messages, with bounded retries on
// 429/5xx/529/connection errors. Prompt caching is asked for with two
// breakpoints: after the system prompt and on the newest block. Tool results of consecutive tool messages
// are merged into one user turn (the API wants alternating roles), and so
// are consecutive user messages. Encoding is deterministic so that earlier
// turns are byte-identical across requests.
//
// It must never put the API key anywhere but the x-api-key header.
package anthropic

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/catalog"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is the anthropic-version header sent.
const APIVersion = "2023-06-01"

// DefaultMaxTokens is sent when the request sets none (the API requires it).
const DefaultMaxTokens = 8192

// Config of a client.
type Config struct {
	BaseURL    string // default DefaultBaseURL (without /v1)
	APIKey     string
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
	base := strings.TrimSuffix(strings.TrimRight(c.BaseURL, "/"), "/v1")
	cl := &Client{ep: provider.Endpoint{
		Base:    cmp.Or(base, DefaultBaseURL),
		Headers: map[string]string{"x-api-key": c.APIKey, "anthropic-version": APIVersion},
		Client:  c.HTTPClient,
		Retry:   c.Retry,
	}}
	cl.wire = provider.Wire{Path: "/v1/messages", What: "messages request", Encode: EncodeRequest, Decode: DecodeResponse,
		Models: cl.Models, NotFoundIsModel: true}
	return cl
}

func (c *Client) Name() string { return "anthropic" }

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	// CacheControl marks a prompt-cache breakpoint.
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type systemBlock struct {
	Type         string        `json:"type"`
	Text         string        `json:"text"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}
type wireMessage struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}
type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}
type wireRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      []systemBlock `json:"system,omitempty"`
	Messages    []wireMessage `json:"messages"`
	Tools       []wireTool    `json:"tools,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
}
type wireResponse struct {
	Type       string  `json:"type"`
	Content    []block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      *struct {
		InputTokens          int64 `json:"input_tokens"`
		OutputTokens         int64 `json:"output_tokens"`
		CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// EncodeRequest is the exact body Chat sends.
func EncodeRequest(req provider.Request) ([]byte, error) {
	w := wireRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature}
	if req.System != "" {
		// The system prompt (with the tools before it) is the stable prefix:
		// one cache breakpoint after it.
		w.System = []systemBlock{{Type: "text", Text: req.System, CacheControl: ephemeral}}
	}
	if w.MaxTokens <= 0 {
		w.MaxTokens = DefaultMaxTokens
	}
	add := func(role string, b block) {
		if n := len(w.Messages); n > 0 && w.Messages[n-1].Role == role && role == "user" {
			w.Messages[n-1].Content = append(w.Messages[n-1].Content, b)
			return
		}
		w.Messages = append(w.Messages, wireMessage{Role: role, Content: []block{b}})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case provider.RoleTool:
			add("user", block{Type: "tool_result", ToolUseID: m.ToolCallID, Content: nonEmpty(m.Content)})
		case provider.RoleAssistant:
			wm := wireMessage{Role: "assistant"}
			if m.Content != "" {
				wm.Content = append(wm.Content, block{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				in := json.RawMessage(tc.Arguments)
				if !json.Valid(in) || !strings.HasPrefix(strings.TrimSpace(tc.Arguments), "{") {
					in = json.RawMessage("{}")
				}
				wm.Content = append(wm.Content, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: in})
			}
			if len(wm.Content) == 0 {
				wm.Content = []block{{Type: "text", Text: "(no reply)"}}
			}
			w.Messages = append(w.Messages, wm)
		default:
			add("user", block{Type: "text", Text: nonEmpty(m.Content)})
		}
	}
	for _, t := range req.Tools {
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters})
	}
	// A second breakpoint on the newest block caches the conversation so
	// far for the next turn (earlier blocks never change; the marker is not
	// part of the cached content).
	if n := len(w.Messages); n > 0 {
		if c := w.Messages[n-1].Content; len(c) > 0 {
			last := c[len(c)-1]
			last.CacheControl = ephemeral
			c[len(c)-1] = last
		}
	}
	return json.Marshal(w)
}

func nonEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// Chat performs one turn.
func (c *Client) Chat(ctx context.Context, req provider.Request) (*provider.Response, error) {
	return c.ep.Chat(ctx, req, c.wire)
}

// DecodeResponse reads a Messages API response.
func DecodeResponse(data []byte) (*provider.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, catalog.ModelProtocol.Wrap(err, "messages response is not JSON")
	}
	if w.Error != nil {
		return nil, catalog.ModelProtocol.New("server error: %s", w.Error.Message)
	}
	if w.Type != "" && w.Type != "message" {
		return nil, catalog.ModelProtocol.New("unexpected response type %q", w.Type)
	}
	out := &provider.Response{}
	out.Message.Role = provider.RoleAssistant
	var text []string
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "thinking":
			out.Message.Reasoning += b.Thinking
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			out.Message.ToolCalls = append(out.Message.ToolCalls, provider.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Message.Content = strings.Join(text, "\n")
	switch w.StopReason {
	case "end_turn", "stop_sequence":
		out.FinishReason = provider.FinishStop
	case "tool_use":
		out.FinishReason = provider.FinishToolCall
	case "max_tokens":
		out.FinishReason = provider.FinishLength
	default:
		out.FinishReason = provider.FinishOther
	}
	if w.Usage != nil {
		out.UsageKnown = true
		out.Usage = provider.Usage{PromptTokens: w.Usage.InputTokens + w.Usage.CacheReadInputTokens, CompletionTokens: w.Usage.OutputTokens, CachedTokens: w.Usage.CacheReadInputTokens}
	} else {
		out.Usage = provider.Usage{PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1}
	}
	return out, nil
}

// Models lists the models the key may use.
func (c *Client) Models(ctx context.Context) ([]provider.ModelInfo, error) {
	data, err := c.ep.Once(ctx, http.MethodGet, c.ep.Base+"/v1/models?limit=100", nil)
	if err != nil {
		return nil, err
	}
	var w struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &w) != nil {
		return nil, nil
	}
	out := make([]provider.ModelInfo, 0, len(w.Data))
	for _, m := range w.Data {
		out = append(out, provider.ModelInfo{ID: m.ID, Loaded: true})
	}
	return out, nil
}
