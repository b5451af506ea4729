package main

import (
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/wire"
)

// hidden are entry points that are not user commands: the detached
// supervisor, the in-sandbox runner and the native and docker sandboxes' inits. Each takes
// its arguments and returns an exit code. They are dispatched before the CLI
// so they start fast and print nothing of their own.
var hidden = map[string]func(args []string) int{
	"__runner":    runner.Main,
	"__sandbox":   native.Main,
	"__docker":    docker.Main,
	"__supervise": func(args []string) int { return supervisor.Main(args, wire.Supervisor, wire.Prewarm) },
}
