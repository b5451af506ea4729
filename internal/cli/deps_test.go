package cli

import "github.com/agentrun/agentrun/internal/wire"

// testDeps are this build's implementations, as cmd/agentrun wires them.
var testDeps = Deps{OpenStore: wire.OpenStore, Coordinator: wire.Coordinator, Backends: wire.Backends, DefaultBackend: wire.DefaultBackend(),
	Agents: wire.Agents(), Providers: wire.Providers(), Workspaces: wire.Workspaces()}
