package supervisor

import (
	"context"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/loop"
	"github.com/agentrun/agentrun/internal/run"
)

// newBuiltin makes the built-in tool-use loop. It runs in the supervisor:
// API keys come from the handed-off environment and never enter the
// sandbox.
func newBuiltin(r *run.Run, getenv func(string) string, warn func(string)) (agent.Agent, error) {
	return loop.New(r.Agent, loop.Options{Getenv: getenv, Repo: r.Repo, Base: r.Base, Warn: warn})
}

// checkBuiltin validates the built-in agent's settings at submit time
// (model given, provider known, key present where required).
func checkBuiltin(_ context.Context, spec run.AgentSpec, getenv func(string) string) error {
	_, err := loop.New(spec, loop.Options{Getenv: getenv})
	return err
}
