// Command agentrun runs coding-agent tasks as isolated, recoverable jobs.
// main is wiring only: hidden entry points used inside sandboxes and by the
// detached supervisor, then the CLI, each handed the implementations that
// internal/wire chooses.
package main

import (
	"os"

	"github.com/agentrun/agentrun/internal/cli"
	_ "github.com/agentrun/agentrun/internal/prefault" // its initializer: the heap made resident at start
	"github.com/agentrun/agentrun/internal/wire"
)

func main() {
	if len(os.Args) > 1 {
		if entry, ok := hidden[os.Args[1]]; ok {
			os.Exit(entry(os.Args[2:]))
		}
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cliDeps()))
}

// cliDeps are the implementations the command line works with.
func cliDeps() cli.Deps {
	return cli.Deps{OpenStore: wire.OpenStore, Coordinator: wire.Coordinator, Backends: wire.Backends, DefaultBackend: wire.DefaultBackend(),
		Agents: wire.Agents(), Providers: wire.Providers(), Workspaces: wire.Workspaces(), OpenServer: wire.OpenServer, BuildSetup: wire.BuildSetup,
		SupervisorDeps: wire.SupervisorDeps, StartAhead: true}
}
