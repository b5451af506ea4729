package execpriv

// The argv the init is started with: agentrun's hidden entry and its role.
const (
	Entry = "__sandbox"
	Role  = "init"
)
