package anthropic_test

import (
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/anthropic"
	"github.com/agentrun/agentrun/internal/agent/provider/providertest"
)

// contract is the provider's configuration of the contract suite.
var contract = providertest.Config{
	New: func(root, key string, retry provider.Retry) provider.Provider {
		return anthropic.New(anthropic.Config{BaseURL: root, APIKey: key, Retry: retry})
	},
	ChatPath: "/v1/messages", ModelsPath: "/v1/models",
	AuthHeader: "x-api-key", AuthPrefix: "",
}

func TestContract(t *testing.T) { providertest.Run(t, contract) }

func BenchmarkConformance(b *testing.B) { providertest.Bench(b, contract) }

// Tool results of one turn go back as one user message, in order, followed
// by any user text in the same message.
func TestEncodeRequestMergesToolResults(t *testing.T) {
	b, err := anthropic.EncodeRequest(provider.Request{Model: "m", System: "sys", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "hi"},
		{Role: provider.RoleAssistant, Content: "looking", ToolCalls: []provider.ToolCall{{ID: "t1", Name: "list_dir", Arguments: "{}"}, {ID: "t2", Name: "read_file", Arguments: `{"path":"a"`}}},
		{Role: provider.RoleTool, ToolCallID: "t1", Content: "a"},
		{Role: provider.RoleTool, ToolCallID: "t2", Content: "error: bad arguments"},
		{Role: provider.RoleUser, Content: "nudge"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","max_tokens":8192,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"looking"},{"type":"tool_use","id":"t1","name":"list_dir","input":{}},{"type":"tool_use","id":"t2","name":"read_file","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a"},{"type":"tool_result","tool_use_id":"t2","content":"error: bad arguments"},{"type":"text","text":"nudge","cache_control":{"type":"ephemeral"}}]}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}
