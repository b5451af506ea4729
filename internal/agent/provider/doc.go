// Package provider is the model provider seam: one chat turn with tools,
// in a provider-neutral form (Message, Request, Response, Usage). The
// built-in agent (agent/loop) talks to its model only through it.
//
// Implementations: provider/openai (OpenAI-compatible chat completions,
// any local or hosted server) and provider/anthropic (Messages API). They
// are listed, with what submit and the gateway need to know of them (the
// gateway route, the URL path, the key variables), as a Registry in
// provider/all; the wiring hands that registry over, so nothing outside
// it names an implementation. Each is tested in its own package over
// recorded wire fixtures served by httptest, through the real client code,
// and passes providertest. fakemodel is a scripted OpenAI-compatible
// server for end-to-end tests of the loop and the supervisor.
//
// API keys are held by the provider on the host; they never enter the
// sandbox, the transcript or the logs. In a run, the provider talks to
// the run's model gateway with a placeholder key, and the gateway holds
// the real one.
package provider
