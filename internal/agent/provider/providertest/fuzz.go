package providertest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider"
)

// FuzzDecode feeds any bytes to a provider's response decoder (seeded with
// every recorded response in the caller's testdata): it must never panic,
// and a response it accepts is a well-formed assistant turn, decoded the
// same way twice.
func FuzzDecode(f *testing.F, decode func([]byte) (*provider.Response, error)) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus in testdata: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("null"))
	f.Add([]byte("{}"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := decode(data)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with a response %+v", err, out)
			}
			return
		}
		if out == nil || out.Message.Role != provider.RoleAssistant {
			t.Fatalf("accepted %q as %+v", data, out)
		}
		switch out.FinishReason {
		case provider.FinishStop, provider.FinishToolCall, provider.FinishLength, provider.FinishOther:
		default:
			t.Fatalf("finish reason %q", out.FinishReason)
		}
		if !out.UsageKnown && (out.Usage.PromptTokens != -1 || out.Usage.CompletionTokens != -1) {
			t.Fatalf("unknown usage reported as %+v", out.Usage)
		}
		again, err := decode(data)
		if err != nil || !reflect.DeepEqual(again, out) {
			t.Fatalf("second decode differs: %+v %v", again, err)
		}
	})
}
