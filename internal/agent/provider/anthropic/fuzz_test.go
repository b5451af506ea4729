package anthropic

import (
	"testing"

	"github.com/agentrun/agentrun/internal/agent/provider/providertest"
)

// FuzzDecodeResponse: the decoder never panics and accepts only
// well-formed assistant turns (providertest.FuzzDecode).
func FuzzDecodeResponse(f *testing.F) { providertest.FuzzDecode(f, DecodeResponse) }
