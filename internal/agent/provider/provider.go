package provider

import (
	"context"
	"encoding/json"
	"net/http"
)

// Role of a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of the conversation, provider-neutral.
type Message struct {
	Role           Role       `json:"role"`
	Content        string     `json:"content,omitempty"`
	Reasoning      string     `json:"reasoning,omitempty"`       // returned reasoning, sent back as received
	ReasoningField string     `json:"reasoning_field,omitempty"` // "reasoning_content" or "reasoning": where it came from
	ToolCalls      []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID     string     `json:"tool_call_id,omitempty"` // for RoleTool
	Name           string     `json:"name,omitempty"`         // tool name for RoleTool
}

// ToolCall is a call the model asked for. Arguments are the raw JSON text
// the model produced (possibly malformed).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool definition offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON schema
}

// Request is one chat turn.
type Request struct {
	Model       string
	System      string
	Messages    []Message
	Tools       []Tool
	Temperature *float64
	MaxTokens   int
}

// FinishReason normalised across providers.
const (
	FinishStop     = "stop"
	FinishToolCall = "tool_calls"
	FinishLength   = "length"
	FinishOther    = "other"
)

// Usage of one turn; -1 where the server did not report it.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
}

// Response is the assistant's reply.
type Response struct {
	Message      Message
	FinishReason string
	Usage        Usage
	UsageKnown   bool
}

// ModelInfo is what a server reports about a model.
type ModelInfo struct {
	ID            string
	ContextWindow int // 0 if unknown
	Loaded        bool
}

// Provider is one model API.
type Provider interface {
	Name() string
	// Chat performs one turn. Retries on 429/5xx/connection errors are the
	// provider's (bounded, with backoff). Errors are catalog errors for an
	// unreachable server, a bad key, a model that is not loaded.
	Chat(ctx context.Context, req Request) (*Response, error)
	// Models lists what the server offers (for context windows and errors);
	// an empty list and nil error where the API has no such listing.
	Models(ctx context.Context) ([]ModelInfo, error)
}

// ContextWindower is an optional capability: a provider that can ask its
// server for a model's context window in tokens (0: the server does not say).
type ContextWindower interface {
	ContextWindow(ctx context.Context, model string) int
}

// Config is what every provider is built from.
type Config struct {
	// BaseURL is the server's API root as the provider's wire format
	// expects it (Kind.URLPath already appended).
	BaseURL    string
	APIKey     string // "" for a local server that wants none
	HTTPClient *http.Client
	Retry      Retry
}

// Kind is one provider implementation as the built-in agent, submit and
// the model gateway see it: data plus a constructor.
type Kind struct {
	// Name is what --provider names.
	Name string
	// Route is the model gateway route its traffic takes.
	Route string
	// URLPath is appended to a server's URL (or a gateway route's) to make
	// BaseURL: "/v1" for the OpenAI wire format, "" where the client adds
	// the version itself.
	URLPath string
	// KeyEnv are the variables its key is read from, in order, when it
	// talks to a server directly.
	KeyEnv []string
	// RequiresKey: the provider cannot work without a key.
	RequiresKey bool
	// New builds the provider.
	New func(Config) Provider
}

// Registry is the list of provider kinds of this build; the first is the
// default. It is made in one place (provider/all).
type Registry []Kind

// Lookup returns the kind called name; "" is the default.
func (r Registry) Lookup(name string) (Kind, bool) {
	if name == "" && len(r) > 0 {
		return r[0], true
	}
	for _, k := range r {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Names lists the kinds in registry order.
func (r Registry) Names() []string {
	n := make([]string, 0, len(r))
	for _, k := range r {
		n = append(n, k.Name)
	}
	return n
}
