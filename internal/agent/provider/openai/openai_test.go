package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/provider/openai"
	"github.com/agentrun/agentrun/internal/agent/provider/providertest"
)

// contract is the provider's configuration of the contract suite.
var contract = providertest.Config{
	New: func(root, key string, retry provider.Retry) provider.Provider {
		return openai.New(openai.Config{BaseURL: root + "/v1", APIKey: key, Retry: retry})
	},
	ChatPath: "/v1/chat/completions", ModelsPath: "/v1/models",
	AuthHeader: "Authorization", AuthPrefix: "Bearer ",
}

func TestContract(t *testing.T) { providertest.Run(t, contract) }

func BenchmarkConformance(b *testing.B) { providertest.Bench(b, contract) }

func TestEncodeRequest(t *testing.T) {
	temp := 0.2
	b, err := openai.EncodeRequest(provider.Request{Model: "m", System: "sys", Temperature: &temp, Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "hi"},
		{Role: provider.RoleAssistant, Reasoning: "think", ReasoningField: "reasoning", ToolCalls: []provider.ToolCall{{ID: "c1", Name: "list_dir", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "c1", Name: "list_dir", Content: "a.go"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":"","reasoning":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"list_dir","arguments":"{}"}}]},` +
		`{"role":"tool","content":"a.go","tool_call_id":"c1","name":"list_dir"}],"temperature":0.2,"stream":false}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		t.Fatal("invalid JSON")
	}
}
