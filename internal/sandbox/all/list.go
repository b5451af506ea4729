package all

import "github.com/agentrun/agentrun/internal/sandbox"

// defaultBackend is chosen when --sandbox is not given.
const defaultBackend = ""

func backends(opts Options) []sandbox.Backend {
	return []sandbox.Backend{}
}
