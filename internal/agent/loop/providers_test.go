package loop

import "github.com/agentrun/agentrun/internal/agent/provider/all"

// testProviders are this build's providers, as the wiring hands them over.
var testProviders = all.Providers()
